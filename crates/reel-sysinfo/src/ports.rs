//! Loopback ports for servers a test or benchmark starts and must name before they run.
//!
//! The usual trick, binding port 0 and closing, hands out a port from the kernel's
//! ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`, 32768–60999 by default). That
//! same range supplies every outgoing connection's local port and every other `:0` listener,
//! so in the moment between closing and the server's own bind, a connection made by a test
//! running beside it can take the port ("Address already in use"). The ports handed out here
//! lie outside that range, where the kernel never assigns one by itself, and no two calls in
//! one process return the same port.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// The lowest port handed out: above the registered services most machines run.
const LOWEST: u16 = 10_000;
/// How many ports must lie below the ephemeral range for them to be used instead of the ones
/// above it.
const ENOUGH: u32 = 2_000;

/// The kernel's ephemeral port range, `(first, last)`; Linux's default when unreadable.
pub fn ephemeral_port_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| parse_port_range(&text))
        .unwrap_or((32_768, 60_999))
}

fn parse_port_range(text: &str) -> Option<(u16, u16)> {
    let mut fields = text.split_whitespace().map(str::parse::<u16>);
    let (first, last) = (fields.next()?.ok()?, fields.next()?.ok()?);
    (first <= last).then_some((first, last))
}

/// The ports outside `ephemeral` to hand out, as `(first, count)`; `None` when the ephemeral
/// range leaves too few.
fn pool(ephemeral: (u16, u16)) -> Option<(u16, u32)> {
    let (first, last) = ephemeral;
    let below = u32::from(first).saturating_sub(u32::from(LOWEST));
    let above = u32::from(u16::MAX) - u32::from(last.max(LOWEST - 1));
    if below >= ENOUGH {
        Some((LOWEST, below))
    } else if above >= ENOUGH {
        Some((last.max(LOWEST - 1) + 1, above))
    } else {
        None
    }
}

/// How many ports this process has handed out; each call moves on to the next.
static HANDED_OUT: AtomicU32 = AtomicU32::new(0);

/// A port on 127.0.0.1 that nothing listens on, outside the ephemeral range, and not returned
/// before by this process. Processes start at different places in the pool (by process id),
/// so concurrent test binaries rarely meet; one that does finds the port taken and moves on.
/// Falls back to a port-0 port when the machine leaves no room outside the ephemeral range.
pub fn unused_loopback_port() -> std::io::Result<u16> {
    let Some((first, count)) = pool(ephemeral_port_range()) else {
        return TcpListener::bind("127.0.0.1:0")?
            .local_addr()
            .map(|a| a.port());
    };
    // 7919 is prime and does not divide `count` in practice, so consecutive process ids start
    // far apart.
    let start = std::process::id().wrapping_mul(7_919) % count;
    for _ in 0..count.min(4_096) {
        let step = HANDED_OUT.fetch_add(1, Ordering::Relaxed);
        let port = first + ((start + step) % count) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!(
            "no free loopback port in {first}..{}",
            u32::from(first) + count
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_file_is_parsed_and_nonsense_refused() {
        assert_eq!(parse_port_range("32768\t60999\n"), Some((32_768, 60_999)));
        assert_eq!(parse_port_range("1024 65535"), Some((1_024, 65_535)));
        assert_eq!(parse_port_range("60999 32768"), None);
        assert_eq!(parse_port_range("32768"), None);
        assert_eq!(parse_port_range("x y"), None);
    }

    #[test]
    fn the_pool_lies_outside_the_ephemeral_range() {
        assert_eq!(pool((32_768, 60_999)), Some((10_000, 22_768)));
        // Little room below: the ports above the range.
        assert_eq!(pool((10_500, 60_999)), Some((61_000, 4_536)));
        // The whole space is ephemeral: none.
        assert_eq!(pool((1_024, 65_535)), None);
        // A range that ends below the lowest port handed out.
        assert_eq!(pool((1_024, 5_000)), Some((10_000, 55_536)));
    }

    #[test]
    fn ports_are_distinct_outside_the_ephemeral_range_and_bindable() {
        let (first, last) = ephemeral_port_range();
        let ports: Vec<u16> = (0..50).map(|_| unused_loopback_port().unwrap()).collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(
            unique.len(),
            ports.len(),
            "a port handed out twice: {ports:?}"
        );
        for &port in &ports {
            if pool((first, last)).is_some() {
                assert!(!(first..=last).contains(&port), "{port} is ephemeral");
            }
            TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
        }
    }
}
