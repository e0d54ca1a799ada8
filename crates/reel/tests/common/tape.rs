//! One iSCSI session to one LUN of a target, through reel's own initiator, for the tests that
//! write and read tapes.

/// One iSCSI session to a library, for one drive.
pub struct Tape {
    runtime: tokio::runtime::Runtime,
    client: reel_iscsi_net::Client,
    pub lun: u64,
}

impl Tape {
    pub fn connect(portal: std::net::SocketAddr, target: &str, lun: u64, isid: u8) -> Tape {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let config = reel_iscsi::initiator_login::InitiatorLoginConfig {
            initiator_name: format!("iqn.2026-11.org.reel.test:tape{isid}"),
            initiator_alias: None,
            target_name: Some(target.into()),
            isid: [0x80, 0, 0, 0, 1, isid],
            tsih: 0,
            cid: 0,
            chap: None,
            mutual_chap: None,
            limits: reel_iscsi::params::Limits::initiator_default(),
            cmd_sn: 1,
        };
        let client = runtime
            .block_on(reel_iscsi_net::Client::connect(
                portal,
                config,
                reel_iscsi_net::ClientOptions::default(),
            ))
            .unwrap();
        Tape {
            runtime,
            client,
            lun,
        }
    }

    /// (status, Data-In, sense) of one command.
    pub fn run(&self, cdb: &[u8], data: Vec<u8>, data_in: u32) -> (u8, Vec<u8>, Vec<u8>) {
        let r = self
            .runtime
            .block_on(
                self.client
                    .execute(self.lun, cdb, bytes::Bytes::from(data), data_in),
            )
            .unwrap();
        (
            r.status,
            r.data.to_vec(),
            r.sense.map(|s| s.to_vec()).unwrap_or_default(),
        )
    }

    /// Runs a command that must answer GOOD.
    pub fn good(&self, cdb: &[u8], data: Vec<u8>) {
        let (status, _, sense) = self.run(cdb, data, 0);
        assert_eq!(status, 0, "CDB {cdb:02x?}: sense {sense:02x?}");
    }

    /// TEST UNIT READY until the unit attentions (power on, medium changed) are reported.
    pub fn ready(&self) {
        for _ in 0..5 {
            if self.run(&[0; 6], Vec::new(), 0).0 == 0 {
                return;
            }
        }
        panic!("LUN {} never became ready", self.lun);
    }

    /// Writes the records at the current position, then a filemark (a synchronising point).
    pub fn write(&self, records: &[Vec<u8>]) {
        self.ready();
        for r in records {
            let n = (r.len() as u32).to_be_bytes();
            self.good(&[0x0A, 0, n[1], n[2], n[3], 0], r.clone());
        }
        self.good(&[0x10, 0, 0, 0, 1, 0], Vec::new());
    }

    /// Rewinds and reads `count` records of `len` bytes.
    pub fn read(&self, count: usize, len: u32) -> Vec<Vec<u8>> {
        self.ready();
        self.good(&[0x01, 0, 0, 0, 0, 0], Vec::new());
        let n = len.to_be_bytes();
        (0..count)
            .map(|_| {
                let (status, data, sense) =
                    self.run(&[0x08, 0, n[1], n[2], n[3], 0], Vec::new(), len);
                assert_eq!(status, 0, "READ on LUN {}: sense {sense:02x?}", self.lun);
                data
            })
            .collect()
    }
}
