//! The changer's Data-Out limit: parameter lists are small, so a transport refuses a longer
//! transfer before receiving it.

mod common;

use common::rig;
use reel_scsi::LogicalUnit;
use reel_smc::MAX_PARAMETER_LIST;

#[test]
fn a_changer_takes_at_most_a_64k_parameter_list() {
    let rig = rig("stk-l700", None, &[]);
    assert_eq!(MAX_PARAMETER_LIST, 64 * 1024);
    assert_eq!(rig.device.max_data_out(), MAX_PARAMETER_LIST);
    assert_eq!(rig.table.max_data_out([0; 8]), MAX_PARAMETER_LIST);
}
