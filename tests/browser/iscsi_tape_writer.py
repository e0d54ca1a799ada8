#!/usr/bin/env python3
"""A minimal iSCSI initiator that writes to one of reel's tape drives.

The browser test needs real iSCSI traffic to see the live monitor move, and neither the
kernel initiator nor libiscsi's tools can write to a tape drive here (libiscsi-bin's
tools read disks; `reel bench iscsi` writes WRITE(10) to null disks). This speaks just
enough iSCSI (RFC 7143) for that: a login straight into the operational stage without
authentication, SCSI commands with immediate data, R2T/Data-Out, NOP-In answers, and a
logout. It writes variable-length WRITE(6) records to the drive at LUN N until a byte
or time budget is used up, ends with a filemark and prints a summary line as JSON.

Usage: iscsi_tape_writer.py HOST:PORT TARGET_IQN LUN [--mb 200] [--seconds 30] [--rate MB/s]
"""

import argparse
import json
import os
import socket
import struct
import sys
import time

BHS = 48


def pad4(n):
    return (4 - n % 4) % 4


class IscsiError(Exception):
    pass


class Session:
    def __init__(self, addr, target, initiator):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.target = target
        self.initiator = initiator
        self.cmdsn = 1
        self.expstatsn = 0
        self.itt = 0
        self.params = {}
        self.buf = bytearray()

    # ------------------------------------------------------------ PDU I/O
    def _recv_exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise IscsiError("the target closed the connection")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def recv_pdu(self):
        bhs = self._recv_exact(BHS)
        ahs_len = bhs[4] * 4
        dlen = int.from_bytes(bhs[5:8], "big")
        if ahs_len:
            self._recv_exact(ahs_len)
        data = self._recv_exact(dlen + pad4(dlen)) [:dlen] if dlen else b""
        return bhs, data

    def send_pdu(self, bhs, data=b""):
        bhs = bytearray(bhs)
        bhs[5:8] = len(data).to_bytes(3, "big")
        self.sock.sendall(bytes(bhs) + data + b"\0" * pad4(len(data)))

    def next_itt(self):
        self.itt = (self.itt + 1) & 0x7FFFFFFF
        return self.itt

    # ------------------------------------------------------------ login / logout
    def login(self):
        keys = {
            "InitiatorName": self.initiator,
            "SessionType": "Normal",
            "TargetName": self.target,
            "HeaderDigest": "None",
            "DataDigest": "None",
            "MaxRecvDataSegmentLength": "262144",
            "ImmediateData": "Yes",
            "InitialR2T": "Yes",
            "MaxBurstLength": "1048576",
            "FirstBurstLength": "65536",
            "MaxConnections": "1",
            "ErrorRecoveryLevel": "0",
            "DefaultTime2Wait": "2",
            "DefaultTime2Retain": "0",
            "MaxOutstandingR2T": "1",
            "DataPDUInOrder": "Yes",
            "DataSequenceInOrder": "Yes",
        }
        text = b"".join(f"{k}={v}".encode() + b"\0" for k, v in keys.items())
        isid = bytes([0x80, 0x00, 0x52, 0x45, 0x4C, 0x01])  # random-qualifier type, "REL"
        itt = self.next_itt()
        tsih = 0
        for _ in range(8):
            bhs = bytearray(BHS)
            bhs[0] = 0x43  # immediate | Login Request
            bhs[1] = 0x80 | (1 << 2) | 3  # T, CSG operational, NSG full feature
            bhs[8:14] = isid
            bhs[14:16] = tsih.to_bytes(2, "big")
            struct.pack_into(">IHHII", bhs, 16, itt, 0, 0, self.cmdsn, self.expstatsn)
            self.send_pdu(bhs, text)
            rbhs, data = self.recv_pdu()
            if rbhs[0] & 0x3F != 0x23:
                raise IscsiError(f"unexpected PDU opcode {rbhs[0]:#x} during login")
            status_class, status_detail = rbhs[36], rbhs[37]
            if status_class != 0:
                raise IscsiError(f"login rejected: class {status_class} detail {status_detail}")
            for item in data.split(b"\0"):
                if b"=" in item:
                    k, v = item.decode().split("=", 1)
                    self.params[k] = v
            tsih = int.from_bytes(rbhs[14:16], "big")
            self.expstatsn = struct.unpack_from(">I", rbhs, 24)[0] + 1
            if rbhs[1] & 0x80 and rbhs[1] & 0x03 == 3:
                self.tsih = tsih
                return
            text = b""  # keep going with nothing more to say
        raise IscsiError("login did not reach the full feature phase")

    def logout(self):
        bhs = bytearray(BHS)
        bhs[0] = 0x46
        bhs[1] = 0x80
        struct.pack_into(">I", bhs, 16, self.next_itt())
        struct.pack_into(">II", bhs, 24, self.cmdsn, self.expstatsn)
        self.send_pdu(bhs)
        while True:
            rbhs, _ = self.recv_pdu()
            if rbhs[0] & 0x3F == 0x26:
                break
        self.sock.close()

    # ------------------------------------------------------------ commands
    def _answer_nop(self, rbhs):
        ttt = struct.unpack_from(">I", rbhs, 20)[0]
        if ttt == 0xFFFFFFFF:
            return
        bhs = bytearray(BHS)
        bhs[0] = 0x40  # immediate NOP-Out
        bhs[1] = 0x80
        bhs[8:16] = rbhs[8:16]
        struct.pack_into(">IIII", bhs, 16, 0xFFFFFFFF, ttt, self.cmdsn, self.expstatsn)
        self.send_pdu(bhs)

    def command(self, lun, cdb, data_out=b"", data_in_len=0):
        """Runs one command; returns (status, sense, data_in)."""
        itt = self.next_itt()
        mrdsl = int(self.params.get("MaxRecvDataSegmentLength", "8192"))
        first_burst = int(self.params.get("FirstBurstLength", "65536"))
        immediate = self.params.get("ImmediateData", "Yes") == "Yes"
        bhs = bytearray(BHS)
        bhs[0] = 0x01
        flags = 0x80 | 0x01  # final, simple task attribute
        if data_out:
            flags |= 0x20
        if data_in_len:
            flags |= 0x40
        bhs[1] = flags
        bhs[8:16] = self._lun_field(lun)
        struct.pack_into(">IIII", bhs, 16, itt, len(data_out) or data_in_len, self.cmdsn, self.expstatsn)
        bhs[32 : 32 + len(cdb)] = cdb
        sent = min(len(data_out), first_burst, mrdsl) if immediate else 0
        self.send_pdu(bhs, data_out[:sent])
        self.cmdsn += 1
        data_in = bytearray()
        while True:
            rbhs, data = self.recv_pdu()
            op = rbhs[0] & 0x3F
            if op == 0x20:  # NOP-In
                self._answer_nop(rbhs)
                continue
            if op == 0x32:  # asynchronous message: nothing to do here
                continue
            if struct.unpack_from(">I", rbhs, 16)[0] != itt:
                continue
            if op == 0x31:  # R2T
                ttt, = struct.unpack_from(">I", rbhs, 20)
                offset, length = struct.unpack_from(">II", rbhs, 40)
                datasn = 0
                end = offset + length
                while offset < end:
                    n = min(mrdsl, end - offset)
                    dbhs = bytearray(BHS)
                    dbhs[0] = 0x05
                    dbhs[1] = 0x80 if offset + n == end else 0
                    dbhs[8:16] = self._lun_field(lun)
                    struct.pack_into(">II", dbhs, 16, itt, ttt)
                    struct.pack_into(">I", dbhs, 28, self.expstatsn)
                    struct.pack_into(">II", dbhs, 36, datasn, offset)
                    self.send_pdu(dbhs, data_out[offset : offset + n])
                    offset += n
                    datasn += 1
            elif op == 0x25:  # Data-In
                data_in += data
                if rbhs[1] & 0x01:  # S: status included
                    self.expstatsn = struct.unpack_from(">I", rbhs, 24)[0] + 1
                    return rbhs[3], b"", bytes(data_in)
            elif op == 0x21:  # SCSI Response
                self.expstatsn = struct.unpack_from(">I", rbhs, 24)[0] + 1
                if rbhs[2] != 0:
                    raise IscsiError(f"iSCSI response code {rbhs[2]}")
                sense = b""
                if len(data) >= 2:
                    n = int.from_bytes(data[:2], "big")
                    sense = data[2 : 2 + n]
                return rbhs[3], sense, bytes(data_in)
            elif op == 0x3F:
                raise IscsiError("the target rejected a PDU")

    @staticmethod
    def _lun_field(lun):
        field = bytearray(8)
        if lun < 256:
            field[1] = lun
        else:
            field[0] = 0x40 | (lun >> 8)
            field[1] = lun & 0xFF
        return bytes(field)


def sense_key(sense):
    if len(sense) < 3:
        return None, None, None
    if sense[0] & 0x7F in (0x72, 0x73):
        return sense[1] & 0x0F, sense[2], sense[3] if len(sense) > 3 else 0
    return sense[2] & 0x0F, sense[12] if len(sense) > 12 else 0, sense[13] if len(sense) > 13 else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("portal", help="HOST:PORT of reel's iSCSI portal")
    ap.add_argument("target", help="target IQN, e.g. iqn.2026-11.org.reel:library")
    ap.add_argument("lun", type=int, help="LUN of the drive (the changer is LUN 0)")
    ap.add_argument("--mb", type=float, default=200.0, help="megabytes (10^6) to write at most")
    ap.add_argument("--seconds", type=float, default=30.0, help="seconds to write at most")
    ap.add_argument("--rate", type=float, default=0.0,
                    help="hold the write rate at this many MB/s (0: as fast as possible)")
    ap.add_argument("--block", type=int, default=256 * 1024, help="bytes per WRITE(6) record")
    ap.add_argument("--initiator", default="iqn.2026-11.org.reel.test:browser-writer")
    args = ap.parse_args()

    s = Session(args.portal, args.target, args.initiator)
    s.login()
    # Clear the unit attentions (power on, medium changed) and wait until the drive is ready.
    deadline = time.time() + 30
    while True:
        status, sense, _ = s.command(args.lun, bytes(6))
        if status == 0:
            break
        key, asc, ascq = sense_key(sense)
        if time.time() > deadline:
            raise IscsiError(f"drive not ready: sense key {key} ASC {asc} ASCQ {ascq}")
        if key == 0x2:  # NOT READY: no cartridge yet, or still loading
            time.sleep(0.2)
    # A pool of data written at moving offsets: partly compressible, partly duplicate.
    pool = os.urandom(4 << 20) + bytes(1 << 20)
    limit = int(args.mb * 1e6)
    written = 0
    records = 0
    start = time.time()
    end = start + args.seconds
    while written < limit and time.time() < end:
        n = min(args.block, limit - written)
        at = (records * 7919 * 512) % (len(pool) - n)
        cdb = bytes([0x0A, 0x00]) + n.to_bytes(3, "big") + b"\0"
        status, sense, _ = s.command(args.lun, cdb, pool[at : at + n])
        if status != 0:
            key, asc, ascq = sense_key(sense)
            raise IscsiError(f"WRITE(6) failed: status {status:#x}, sense key {key} ASC {asc:#x} ASCQ {ascq:#x}")
        written += n
        records += 1
        if args.rate > 0:
            ahead = written / (args.rate * 1e6) - (time.time() - start)
            if ahead > 0:
                time.sleep(ahead)
    status, sense, _ = s.command(args.lun, bytes([0x10, 0x01, 0, 0, 1, 0]))  # WRITE FILEMARKS(6), immediate
    elapsed = time.time() - start
    s.logout()
    print(json.dumps({"bytes": written, "records": records, "seconds": round(elapsed, 3),
                      "mb_per_s": round(written / 1e6 / elapsed, 1) if elapsed else None,
                      "filemark_status": status}))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (IscsiError, OSError) as e:
        print(f"iscsi_tape_writer: {e}", file=sys.stderr)
        sys.exit(1)
