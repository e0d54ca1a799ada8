//! Service readiness for systemd (`Type=notify`): the sd_notify protocol, a datagram of
//! `KEY=VALUE` lines sent to the socket named by `$NOTIFY_SOCKET` (a path, or `@name` for an
//! abstract socket). Without `$NOTIFY_SOCKET` (not started by systemd) nothing is sent.
//! Written by hand: the protocol is one `sendto`, not worth a dependency.

use std::io;
use std::os::unix::net::UnixDatagram;

/// Tells the service manager reel is serving (iSCSI portal and console listening).
pub fn ready(status: &str) {
    send_env(&format!("READY=1\nSTATUS={status}\n"));
}

/// Tells the service manager reel is stopping (synchronising the drives and the store).
pub fn stopping() {
    send_env("STOPPING=1\nSTATUS=stopping: synchronising drives and the store\n");
}

fn send_env(message: &str) {
    let Some(socket) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    if let Err(e) = send_to(&socket.to_string_lossy(), message) {
        // Readiness is advisory to reel itself: serve on, and say why systemd may time out.
        eprintln!(
            "reel: warning: telling systemd ({}) failed: {e}",
            socket.to_string_lossy()
        );
    }
}

/// Sends one notification datagram to `socket` (`/path` or `@abstract`).
pub fn send_to(socket: &str, message: &str) -> io::Result<()> {
    let sender = UnixDatagram::unbound()?;
    if let Some(name) = socket.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
        sender.send_to_addr(message.as_bytes(), &addr)?;
    } else {
        sender.send_to(message.as_bytes(), socket)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notification_is_one_datagram_of_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        send_to(path.to_str().unwrap(), "READY=1\nSTATUS=serving\n").unwrap();
        let mut buf = [0u8; 256];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=serving\n");
    }

    #[test]
    fn abstract_sockets_are_named_with_an_at_sign() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("reel-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&addr).unwrap();
        send_to(&format!("@{name}"), "STOPPING=1\n").unwrap();
        let mut buf = [0u8; 64];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1\n");
    }

    #[test]
    fn a_missing_socket_is_an_error_not_a_panic() {
        assert!(send_to("/nonexistent/reel-notify", "READY=1\n").is_err());
    }
}
