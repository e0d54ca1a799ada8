/*
 * libiscsi-tape: an independent iSCSI tape client on libiscsi, to cross-check reel-bench.
 *
 * It logs in to PORTAL/IQN and runs on the tape drive at LUN what reel-bench runs on each
 * drive: TEST UNIT READY until the unit attentions are gone, variable block mode (MODE
 * SELECT(6) with block length 0 when MODE SENSE(6) says otherwise), REWIND, WRITE(6) of
 * TOTAL bytes in RECORD-byte variable-length records with QD commands in flight, WRITE
 * FILEMARKS(6) 1 (IMMED=0), REWIND, READ(6) of every record with QD in flight (length and
 * every byte checked), one more READ(6) that must stop at the filemark, REWIND.
 *
 *   libiscsi-tape PORTAL IQN LUN RECORD TOTAL QD [options]
 *     PORTAL   host:port, e.g. 127.0.0.1:3260
 *     RECORD, TOTAL   bytes; K/M/G/T suffixes are binary (KiB...)
 *   options:
 *     --changer LUN --slot ADDR --drive-element ADDR [--transport ADDR]
 *                 MOVE MEDIUM slot -> drive first; afterwards LOAD UNLOAD and move it back
 *     --initiator IQN   initiator name (default iqn.2026-11.org.reel.bench:libiscsi-tape)
 *     --seed N          data pattern seed (default 1)
 *     --dump            write nothing: read RECORD-byte records from the beginning of the
 *                       tape (TOTAL bytes, the last record may be short) and copy them to
 *                       stdout, then check the filemark (to compare what another tool wrote)
 *     --timeout S       seconds without any completion before giving up (default 300)
 *     --target-pid PID  also report that process's CPU (the target's, from /proc/PID/stat)
 *
 * Output: one line on stdout,
 *   libiscsi-tape record_size=.. total_bytes=.. queue_depth=.. records=.. write_s=..
 *   write_data_s=.. write_mb_s=.. read_s=.. read_mb_s=.. verified_bytes=..
 *   write_client_cpu_s_per_gb=.. read_client_cpu_s_per_gb=.. [write_target_cpu_s_per_gb=..
 *   read_target_cpu_s_per_gb=..]   (CPU seconds, user + system, per 10^9 bytes)
 * MB = 10^6 bytes. Write: first WRITE(6) sent to the final filemark's GOOD status
 * (write_data_s: to the last WRITE(6) status); read: first READ(6) sent to the last READ(6)
 * status. This is how reel-bench times its phases (crates/reel-bench/src/cell.rs, tape.rs).
 * Progress goes to stderr. Any CHECK CONDITION (other than the expected filemark) ends the
 * program with status 3 and a line naming the command, its CDB and the sense key, ASC and
 * ASCQ; a wrong length or wrong data ends it with status 4; usage errors 2, others 1.
 *
 * Data: every record is a slice of a 64 MiB pseudo-random pool at an offset that depends on
 * the record's index (an odd multiplier modulo the pool's 2^23 8-byte positions, so no two
 * records of a run start at the same place); writes send the pool's bytes directly, reads
 * compare every byte with the same slice.
 *
 * Build: gcc -O2 -Wall -Wextra -Werror -o libiscsi-tape libiscsi-tape.c -liscsi
 * (Debian: libiscsi-dev). Part of bench/compare (see BENCHMARKING.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#define PROG "libiscsi-tape"
#define POOL_BYTES ((uint64_t)64 << 20)
#define MAX_RECORD ((1u << 24) - 1)
#define MAX_DEPTH 64

static struct iscsi_context *iscsi;
static int lun;
static double command_timeout = 300;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds (user + system) of this process so far. */
static double own_cpu(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* CPU seconds of process `pid` so far (utime + stime, fields 14 and 15 of /proc/PID/stat,
 * counted after the ')' that ends the command name); -1 if it cannot be read. */
static double pid_cpu(long pid)
{
	if (pid <= 0)
		return -1;
	char path[64], text[1024];
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return -1;
	size_t n = fread(text, 1, sizeof text - 1, f);
	fclose(f);
	text[n] = 0;
	char *p = strrchr(text, ')');
	if (p == NULL)
		return -1;
	unsigned long long utime = 0, stime = 0;
	/* after ')': state(3) ppid(4) pgrp(5) session(6) tty(7) tpgid(8) flags(9) minflt(10)
	 * cminflt(11) majflt(12) cmajflt(13) utime(14) stime(15) */
	if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
		return -1;
	return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

static void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- sizes and numbers ------------------------------------------------------------------ */

static uint64_t parse_size(const char *what, const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		die(2, "%s %s: not a size", what, s);
	uint64_t mult = 1;
	switch (*end) {
	case 'K': case 'k': mult = 1ull << 10; end++; break;
	case 'M': case 'm': mult = 1ull << 20; end++; break;
	case 'G': case 'g': mult = 1ull << 30; end++; break;
	case 'T': case 't': mult = 1ull << 40; end++; break;
	default: break;
	}
	if (mult > 1 && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0))
		end += strlen(end);
	if (*end)
		die(2, "%s %s: unknown suffix %s (K, M, G, T are binary)", what, s, end);
	if (v > UINT64_MAX / mult)
		die(2, "%s %s: too large", what, s);
	return (uint64_t)v * mult;
}

static long parse_int(const char *what, const char *s, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 0);
	if (errno || end == s || *end || v < lo || v > hi)
		die(2, "%s %s: must be a number from %ld to %ld", what, s, lo, hi);
	return v;
}

/* ---- SCSI: CDBs, sense ------------------------------------------------------------------ */

static const char *command_name(const uint8_t *cdb)
{
	switch (cdb[0]) {
	case 0x00: return "TEST UNIT READY";
	case 0x01: return "REWIND";
	case 0x08: return "READ(6)";
	case 0x0A: return "WRITE(6)";
	case 0x10: return "WRITE FILEMARKS(6)";
	case 0x15: return "MODE SELECT(6)";
	case 0x1A: return "MODE SENSE(6)";
	case 0x1B: return "LOAD UNLOAD";
	case 0xA5: return "MOVE MEDIUM";
	default: return "command";
	}
}

static void cdb6(uint8_t *cdb, uint8_t op, uint8_t b1, uint32_t len24)
{
	cdb[0] = op;
	cdb[1] = b1;
	cdb[2] = (uint8_t)(len24 >> 16);
	cdb[3] = (uint8_t)(len24 >> 8);
	cdb[4] = (uint8_t)len24;
	cdb[5] = 0;
}

static void move_medium_cdb(uint8_t *cdb, unsigned transport, unsigned src, unsigned dst)
{
	memset(cdb, 0, 12);
	cdb[0] = 0xA5;
	cdb[2] = (uint8_t)(transport >> 8);
	cdb[3] = (uint8_t)transport;
	cdb[4] = (uint8_t)(src >> 8);
	cdb[5] = (uint8_t)src;
	cdb[6] = (uint8_t)(dst >> 8);
	cdb[7] = (uint8_t)dst;
}

struct sense {
	int valid;
	int key, asc, ascq;
	int filemark, eom, ili;
	const uint8_t *raw;
	int len;
};

/* Sense data of a CHECK CONDITION: libiscsi keeps the data segment (2-byte length, then the
 * sense bytes) in task->datain. Fixed (70h/71h) and descriptor (72h/73h) formats. */
static struct sense task_sense(const struct scsi_task *task)
{
	struct sense s;
	memset(&s, 0, sizeof s);
	if (task->datain.data == NULL || task->datain.size < 4)
		return s;
	int len = (task->datain.data[0] << 8) | task->datain.data[1];
	if (len > task->datain.size - 2)
		len = task->datain.size - 2;
	const uint8_t *b = task->datain.data + 2;
	s.raw = b;
	s.len = len;
	int code = len > 0 ? b[0] & 0x7F : 0;
	if ((code == 0x70 || code == 0x71) && len >= 3) {
		s.valid = 1;
		s.key = b[2] & 0x0F;
		s.filemark = !!(b[2] & 0x80);
		s.eom = !!(b[2] & 0x40);
		s.ili = !!(b[2] & 0x20);
		s.asc = len > 12 ? b[12] : 0;
		s.ascq = len > 13 ? b[13] : 0;
	} else if ((code == 0x72 || code == 0x73) && len >= 4) {
		s.valid = 1;
		s.key = b[1] & 0x0F;
		s.asc = b[2];
		s.ascq = b[3];
		/* Stream commands descriptor (04h): FILEMARK, EOM, ILI in its byte 3. */
		for (int at = 8; at + 1 < len; at += 2 + b[at + 1]) {
			if (b[at] == 0x04 && at + 3 < len) {
				s.filemark = !!(b[at + 3] & 0x80);
				s.eom = !!(b[at + 3] & 0x40);
				s.ili = !!(b[at + 3] & 0x20);
			}
		}
	}
	return s;
}

static const char *status_name(int status)
{
	switch (status) {
	case SCSI_STATUS_GOOD: return "GOOD";
	case SCSI_STATUS_CHECK_CONDITION: return "CHECK CONDITION";
	case SCSI_STATUS_CANCELLED: return "CANCELLED (session lost)";
	case SCSI_STATUS_ERROR: return "ERROR (transport)";
	case 0x08: return "BUSY";
	case 0x18: return "RESERVATION CONFLICT";
	case 0x28: return "TASK SET FULL";
	default: return "unexpected status";
	}
}

/* Ends the program: the command, its CDB, the status and the sense. */
static void fail(int on_lun, const char *context, const uint8_t *cdb, int cdb_len, int status,
		 const struct scsi_task *task) __attribute__((noreturn));
static void fail(int on_lun, const char *context, const uint8_t *cdb, int cdb_len, int status,
		 const struct scsi_task *task)
{
	char hex[3 * 16 + 1] = "";
	for (int i = 0; i < cdb_len && i < 16; i++)
		snprintf(hex + 3 * i, 4, "%02x ", cdb[i]);
	fprintf(stderr, PROG ": LUN %d: %s (%s) failed: %s (0x%x); CDB %s", on_lun,
		command_name(cdb), context, status_name(status), (unsigned)status, hex);
	if (task != NULL && status == SCSI_STATUS_CHECK_CONDITION) {
		struct sense s = task_sense(task);
		if (s.valid) {
			fprintf(stderr, "; sense key 0x%x (%s), ASC 0x%02x ASCQ 0x%02x%s%s%s", s.key,
				scsi_sense_key_str(s.key), s.asc, s.ascq, s.filemark ? " FILEMARK" : "",
				s.eom ? " EOM" : "", s.ili ? " ILI" : "");
		}
		fprintf(stderr, "; sense bytes");
		for (int i = 0; i < s.len && i < 32; i++)
			fprintf(stderr, " %02x", s.raw[i]);
		if (s.len == 0)
			fprintf(stderr, " (none)");
	}
	if (status == SCSI_STATUS_ERROR || status == SCSI_STATUS_CANCELLED)
		fprintf(stderr, "; libiscsi: %s", iscsi_get_error(iscsi));
	fputc('\n', stderr);
	exit(status == SCSI_STATUS_CHECK_CONDITION ? 3 : 1);
}

/* One command, waited for; the task (status in task->status) for the caller to check and free. */
static struct scsi_task *command(int on_lun, const uint8_t *cdb, int cdb_len, int dir,
				 uint32_t xfer, uint8_t *out)
{
	struct scsi_task *task = scsi_create_task(cdb_len, (unsigned char *)cdb, dir, (int)xfer);
	if (task == NULL)
		die(1, "out of memory creating a task");
	struct iscsi_data data = { .size = xfer, .data = out };
	struct scsi_task *done =
		iscsi_scsi_command_sync(iscsi, on_lun, task, dir == SCSI_XFER_WRITE ? &data : NULL);
	if (done == NULL)
		die(1, "LUN %d: %s: %s", on_lun, command_name(cdb), iscsi_get_error(iscsi));
	return done;
}

/* A command that must end GOOD; its task (data in task->datain). */
static struct scsi_task *good(int on_lun, const uint8_t *cdb, int cdb_len, int dir,
			      uint32_t xfer, uint8_t *out, const char *context)
{
	struct scsi_task *task = command(on_lun, cdb, cdb_len, dir, xfer, out);
	if (task->status != SCSI_STATUS_GOOD)
		fail(on_lun, context, cdb, cdb_len, task->status, task);
	return task;
}

static void simple(uint8_t op, uint8_t b1, uint32_t len24, const char *context)
{
	uint8_t cdb[6];
	cdb6(cdb, op, b1, len24);
	scsi_free_scsi_task(good(lun, cdb, 6, SCSI_XFER_NONE, 0, NULL, context));
}

/* TEST UNIT READY until GOOD: unit attentions are consumed, NOT READY is waited out (60 s). */
static void wait_ready(const char *context)
{
	uint8_t cdb[6];
	cdb6(cdb, 0x00, 0, 0);
	double deadline = now() + 60;
	int attentions = 0;
	for (;;) {
		struct scsi_task *t = command(lun, cdb, 6, SCSI_XFER_NONE, 0, NULL);
		if (t->status == SCSI_STATUS_GOOD) {
			scsi_free_scsi_task(t);
			break;
		}
		struct sense s = t->status == SCSI_STATUS_CHECK_CONDITION ? task_sense(t)
									 : (struct sense){ 0 };
		int attention = s.valid && s.key == SCSI_SENSE_UNIT_ATTENTION;
		int not_ready = s.valid && s.key == SCSI_SENSE_NOT_READY;
		if (!(attention || not_ready) || now() > deadline || attentions > 32)
			fail(lun, context, cdb, 6, t->status, t);
		scsi_free_scsi_task(t);
		if (attention)
			attentions++;
		else
			usleep(50 * 1000);
	}
	if (attentions)
		note("LUN %d ready (%d unit attention(s) consumed)", lun, attentions);
}

/* MODE SENSE(6); MODE SELECT(6) with a block descriptor of block length 0 when the drive is
 * in fixed-block mode (or reports no descriptor); then checks the result. */
static void variable_block_mode(void)
{
	uint8_t sense_cdb[6] = { 0x1A, 0, 0x3F, 0, 0xFF, 0 };
	for (int attempt = 0;; attempt++) {
		struct scsi_task *t = good(lun, sense_cdb, 6, SCSI_XFER_READ, 255, NULL,
					   "reading the block descriptor");
		const uint8_t *d = t->datain.data;
		int n = t->datain.size;
		if (n < 4)
			die(1, "LUN %d: MODE SENSE(6) answered %d bytes", lun, n);
		int have_desc = d[3] >= 8 && n >= 12;
		uint32_t block = have_desc ? ((uint32_t)d[9] << 16 | (uint32_t)d[10] << 8 | d[11]) : 0;
		if (have_desc && block == 0) {
			scsi_free_scsi_task(t);
			if (attempt)
				note("LUN %d: variable block mode selected", lun);
			return;
		}
		if (attempt)
			die(1, "LUN %d: still in fixed block mode (%u-byte blocks) after MODE SELECT(6)",
			    lun, block);
		uint8_t param[12] = { 0, 0, (uint8_t)(d[2] & 0x7F), 8, have_desc ? d[4] : 0,
				      0, 0, 0, 0, 0, 0, 0 };
		scsi_free_scsi_task(t);
		uint8_t select_cdb[6] = { 0x15, 0x10, 0, 0, sizeof param, 0 };
		scsi_free_scsi_task(good(lun, select_cdb, 6, SCSI_XFER_WRITE, sizeof param, param,
					 "selecting variable block mode"));
	}
}

/* ---- data ------------------------------------------------------------------------------- */

static uint8_t *pool;
static uint64_t pool_positions; /* 8-byte positions a record may start at: a power of two */

static void make_pool(uint64_t seed, uint32_t max_record)
{
	size_t bytes = POOL_BYTES + max_record + 8;
	pool = malloc(bytes);
	if (pool == NULL)
		die(1, "out of memory for the %zu-byte data pool", bytes);
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
	for (size_t i = 0; i + 8 <= bytes; i += 8) {
		/* xorshift64* */
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		uint64_t v = x * 0x2545F4914F6CDD1Dull;
		memcpy(pool + i, &v, 8);
	}
	pool_positions = POOL_BYTES / 8;
}

static const uint8_t *record_data(uint64_t index)
{
	uint64_t pos = (index * 0x9E3779B97F4A7C15ull) & (pool_positions - 1);
	return pool + pos * 8;
}

/* ---- the pipelines ---------------------------------------------------------------------- */

struct slot {
	int busy;
	uint64_t index;
	uint32_t len;
	uint8_t cdb[6];
	uint8_t *buf; /* read phase: where READ(6) data lands */
};

struct pipeline {
	int write;
	uint32_t record;
	uint64_t total, records;
	int depth;
	struct slot slots[MAX_DEPTH];
	uint64_t next, done, bytes;
	int inflight;
	double last_completion;
};

static uint32_t record_len(const struct pipeline *p, uint64_t index)
{
	uint64_t start = index * p->record;
	uint64_t left = p->total - start;
	return left < p->record ? (uint32_t)left : p->record;
}

/* Ends the program for a record that failed: its status, its length or its data. */
static void record_failed(const struct slot *s, int status, const struct scsi_task *task)
	__attribute__((noreturn));
static void record_failed(const struct slot *s, int status, const struct scsi_task *task)
{
	char context[96];
	snprintf(context, sizeof context, "record %" PRIu64 ", %u bytes", s->index, s->len);
	if (status != SCSI_STATUS_GOOD)
		fail(lun, context, s->cdb, 6, status, task);
	if (task->residual_status != SCSI_RESIDUAL_NO_RESIDUAL || task->residual != 0)
		die(4, "LUN %d: %s (%s): residual %zu (%s)", lun, command_name(s->cdb), context,
		    task->residual,
		    task->residual_status == SCSI_RESIDUAL_UNDERFLOW ? "underflow" : "overflow");
	const uint8_t *want = record_data(s->index);
	uint32_t at = 0;
	while (at < s->len && s->buf[at] == want[at])
		at++;
	die(4, "LUN %d: READ(6) (%s) returned different data: first difference at byte %u of the record: read 0x%02x, written 0x%02x",
	    lun, context, at, s->buf[at], want[at]);
}

static void completed(struct iscsi_context *ctx, int status, void *command_data, void *private_data)
{
	(void)ctx;
	struct scsi_task *task = command_data;
	struct slot *s = private_data;
	if (status != SCSI_STATUS_GOOD || task->residual_status != SCSI_RESIDUAL_NO_RESIDUAL ||
	    task->residual != 0 || (s->buf != NULL && memcmp(s->buf, record_data(s->index), s->len) != 0))
		record_failed(s, status, task);
	scsi_free_scsi_task(task);
	s->busy = 0;
}

static void submit(struct pipeline *p, struct slot *s)
{
	s->busy = 1;
	s->index = p->next++;
	s->len = record_len(p, s->index);
	cdb6(s->cdb, p->write ? 0x0A : 0x08, 0, s->len); /* FIXED = 0; READ: SILI = 0 */
	struct scsi_task *task =
		scsi_create_task(6, s->cdb, p->write ? SCSI_XFER_WRITE : SCSI_XFER_READ, (int)s->len);
	if (task == NULL)
		die(1, "out of memory creating a task");
	struct iscsi_data data = { .size = s->len, .data = (unsigned char *)record_data(s->index) };
	if (!p->write && scsi_task_add_data_in_buffer(task, (int)s->len, s->buf) != 0)
		die(1, "scsi_task_add_data_in_buffer failed");
	if (iscsi_scsi_command_async(iscsi, lun, task, completed, p->write ? &data : NULL, s) != 0)
		die(1, "LUN %d: queueing %s of record %" PRIu64 ": %s", lun, command_name(s->cdb),
		    s->index, iscsi_get_error(iscsi));
	p->inflight++;
}

/* Runs the phase; returns the time the last data command completed. */
static double run_pipeline(struct pipeline *p)
{
	p->last_completion = now();
	while (p->done < p->records) {
		for (int i = 0; i < p->depth && p->inflight < p->depth && p->next < p->records; i++)
			if (!p->slots[i].busy)
				submit(p, &p->slots[i]);
		struct pollfd pfd = { .fd = iscsi_get_fd(iscsi), .events = (short)iscsi_which_events(iscsi) };
		int r = poll(&pfd, 1, 1000);
		if (r < 0 && errno != EINTR)
			die(1, "poll: %s", strerror(errno));
		if (iscsi_service(iscsi, r > 0 ? pfd.revents : 0) < 0)
			die(1, "LUN %d: session failed: %s", lun, iscsi_get_error(iscsi));
		int busy = 0;
		for (int i = 0; i < p->depth; i++)
			busy += p->slots[i].busy;
		int finished = p->inflight - busy;
		if (finished > 0) {
			p->inflight = busy;
			p->done += (uint64_t)finished;
			p->last_completion = now();
		} else if (now() - p->last_completion > command_timeout) {
			die(1, "LUN %d: no command completed for %.0f s (%" PRIu64 " of %" PRIu64 " records done)",
			    lun, command_timeout, p->done, p->records);
		}
	}
	p->bytes = p->total;
	return p->last_completion;
}

/* ---- main ------------------------------------------------------------------------------- */

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
	fprintf(stderr,
		"usage: " PROG " PORTAL IQN LUN RECORD TOTAL QD [--changer LUN --slot ADDR --drive-element ADDR\n"
		"       [--transport ADDR]] [--initiator IQN] [--seed N] [--dump] [--timeout S] [--target-pid PID]\n"
		"  e.g. " PROG " 127.0.0.1:3260 iqn.2026-11.org.example:tape 1 256K 2G 8\n");
	exit(2);
}

static int valued(const char *option)
{
	static const char *const names[] = { "--changer", "--slot", "--drive-element", "--transport",
					     "--initiator", "--seed", "--timeout", "--target-pid" };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcmp(option, names[i]) == 0)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	const char *initiator = "iqn.2026-11.org.reel.bench:libiscsi-tape";
	long changer = -1, slot = -1, drive_element = -1, transport = 0, target_pid = 0;
	uint64_t seed = 1;
	int dump = 0;
	const char *pos[6];
	int npos = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
			usage();
		else if (strcmp(a, "--dump") == 0)
			dump = 1;
		else if (strncmp(a, "--", 2) == 0 && !valued(a))
			die(2, "unknown option %s (see --help)", a);
		else if (strncmp(a, "--", 2) == 0 && v == NULL)
			die(2, "%s needs a value", a);
		else if (strcmp(a, "--changer") == 0)
			changer = parse_int(a, argv[++i], 0, 255);
		else if (strcmp(a, "--slot") == 0)
			slot = parse_int(a, argv[++i], 0, 0xFFFF);
		else if (strcmp(a, "--drive-element") == 0)
			drive_element = parse_int(a, argv[++i], 0, 0xFFFF);
		else if (strcmp(a, "--transport") == 0)
			transport = parse_int(a, argv[++i], 0, 0xFFFF);
		else if (strcmp(a, "--target-pid") == 0)
			target_pid = parse_int(a, argv[++i], 1, 0x7FFFFFFF);
		else if (strcmp(a, "--initiator") == 0)
			initiator = argv[++i];
		else if (strcmp(a, "--seed") == 0)
			seed = parse_size(a, argv[++i]);
		else if (strcmp(a, "--timeout") == 0)
			command_timeout = (double)parse_int(a, argv[++i], 1, 86400);
		else if (npos < 6)
			pos[npos++] = a;
		else
			usage();
	}
	if (npos != 6)
		usage();
	const char *portal = pos[0], *iqn = pos[1];
	lun = (int)parse_int("LUN", pos[2], 0, 255);
	uint64_t record = parse_size("RECORD", pos[3]);
	uint64_t total = parse_size("TOTAL", pos[4]);
	int depth = (int)parse_int("QD", pos[5], 1, MAX_DEPTH);
	if (record < 1 || record > MAX_RECORD)
		die(2, "RECORD %s: must be 1 to %u bytes (WRITE(6)'s 24-bit length)", pos[3], MAX_RECORD);
	if (total < 1)
		die(2, "TOTAL must be at least 1 byte");
	if ((changer >= 0) != (slot >= 0) || (changer >= 0) != (drive_element >= 0))
		die(2, "--changer, --slot and --drive-element go together");
	if (dump && isatty(STDOUT_FILENO))
		die(2, "--dump writes the tape's bytes to stdout: redirect it");

	iscsi = iscsi_create_context(initiator);
	if (iscsi == NULL)
		die(1, "iscsi_create_context failed");
	if (iscsi_set_targetname(iscsi, iqn) != 0 ||
	    iscsi_set_session_type(iscsi, ISCSI_SESSION_NORMAL) != 0 ||
	    iscsi_set_header_digest(iscsi, ISCSI_HEADER_DIGEST_NONE) != 0 ||
	    iscsi_set_immediate_data(iscsi, ISCSI_IMMEDIATE_DATA_YES) != 0 ||
	    iscsi_set_initial_r2t(iscsi, ISCSI_INITIAL_R2T_NO) != 0)
		die(1, "setting session parameters: %s", iscsi_get_error(iscsi));
	/* A dropped session must fail the run, not be replayed (tape commands are not idempotent). */
	iscsi_set_noautoreconnect(iscsi, 1);
	/* Login, then TEST UNIT READY of a LUN (libiscsi retries the power-on unit attention).
	 * The changer's LUN when there is one: the drive may report other attentions. */
	if (iscsi_full_connect_sync(iscsi, portal, changer >= 0 ? (int)changer : lun) != 0)
		die(1, "login to %s at %s (LUN %d): %s", iqn, portal, changer >= 0 ? (int)changer : lun,
		    iscsi_get_error(iscsi));
	/* libiscsi sets TCP_NODELAY itself; make sure of it, as reel's initiator sets it too. */
	int one = 1;
	if (setsockopt(iscsi_get_fd(iscsi), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
		note("TCP_NODELAY: %s", strerror(errno));

	if (changer >= 0) {
		uint8_t cdb[12];
		move_medium_cdb(cdb, (unsigned)transport, (unsigned)slot, (unsigned)drive_element);
		scsi_free_scsi_task(good((int)changer, cdb, 12, SCSI_XFER_NONE, 0, NULL, "load"));
		note("moved slot 0x%lx to drive element 0x%lx", slot, drive_element);
	}
	wait_ready(changer >= 0 ? "after loading" : "waiting for the cartridge");
	variable_block_mode();
	simple(0x01, 0, 0, "rewind before writing");

	uint64_t records = (total + record - 1) / record;
	if (dump) {
		struct pipeline p = { .record = (uint32_t)record, .total = total };
		for (uint64_t i = 0; i < records; i++) {
			uint32_t len = record_len(&p, i);
			uint8_t cdb[6];
			cdb6(cdb, 0x08, 0, len);
			struct scsi_task *t = command(lun, cdb, 6, SCSI_XFER_READ, len, NULL);
			if (t->status != SCSI_STATUS_GOOD) {
				char context[64];
				snprintf(context, sizeof context, "record %" PRIu64 " of the dump", i);
				fail(lun, context, cdb, 6, t->status, t);
			}
			if (t->datain.size != (int)len || t->residual != 0)
				die(4, "LUN %d: READ(6) of record %" PRIu64 " returned %d bytes, expected %u",
				    lun, i, t->datain.size, len);
			if (fwrite(t->datain.data, 1, len, stdout) != len)
				die(1, "writing to stdout: %s", strerror(errno));
			scsi_free_scsi_task(t);
		}
		if (fflush(stdout) != 0)
			die(1, "writing to stdout: %s", strerror(errno));
	} else {
		make_pool(seed, (uint32_t)record);
		struct pipeline p = { .write = 1, .record = (uint32_t)record, .total = total,
				      .records = records, .depth = depth };
		note("writing %" PRIu64 " records of %" PRIu64 " bytes, %d in flight", records, record, depth);
		double c0 = own_cpu(), s0 = pid_cpu(target_pid);
		double t0 = now();
		double data_end = run_pipeline(&p);
		simple(0x10, 0, 1, "final filemark (IMMED=0)");
		double t1 = now();
		double c1 = own_cpu(), s1 = pid_cpu(target_pid);
		double write_s = t1 - t0, write_data_s = data_end - t0;

		simple(0x01, 0, 0, "rewind before reading");

		struct pipeline r = { .write = 0, .record = (uint32_t)record, .total = total,
				      .records = records, .depth = depth };
		for (int i = 0; i < depth; i++) {
			r.slots[i].buf = malloc(record);
			if (r.slots[i].buf == NULL)
				die(1, "out of memory");
		}
		note("reading back and verifying");
		double c2 = own_cpu(), s2 = pid_cpu(target_pid);
		double t2 = now();
		double t3 = run_pipeline(&r);
		double read_s = t3 - t2;
		double c3 = own_cpu(), s3 = pid_cpu(target_pid);
		double gb = (double)total / 1e9;
		for (int i = 0; i < depth; i++)
			free(r.slots[i].buf);
		printf(PROG " record_size=%" PRIu64 " total_bytes=%" PRIu64 " queue_depth=%d records=%" PRIu64
		       " write_s=%.4f write_data_s=%.4f write_mb_s=%.1f read_s=%.4f read_mb_s=%.1f"
		       " verified_bytes=%" PRIu64 " write_client_cpu_s_per_gb=%.3f read_client_cpu_s_per_gb=%.3f",
		       record, total, depth, records, write_s, write_data_s, (double)total / write_s / 1e6,
		       read_s, (double)total / read_s / 1e6, r.bytes, (c1 - c0) / gb, (c3 - c2) / gb);
		if (s0 >= 0 && s1 >= 0 && s2 >= 0 && s3 >= 0)
			printf(" write_target_cpu_s_per_gb=%.3f read_target_cpu_s_per_gb=%.3f", (s1 - s0) / gb,
			       (s3 - s2) / gb);
		printf("\n");
		fflush(stdout);
	}

	/* The next READ(6) must stop at the filemark. */
	{
		uint8_t cdb[6];
		cdb6(cdb, 0x08, 0, (uint32_t)record);
		struct scsi_task *t = command(lun, cdb, 6, SCSI_XFER_READ, (uint32_t)record, NULL);
		struct sense s = t->status == SCSI_STATUS_CHECK_CONDITION ? task_sense(t)
									 : (struct sense){ 0 };
		if (!(s.valid && (s.filemark || (s.asc == 0x00 && s.ascq == 0x01))))
			fail(lun, "expected the filemark after the last record", cdb, 6, t->status, t);
		scsi_free_scsi_task(t);
	}
	simple(0x01, 0, 0, "rewind after reading");
	if (changer >= 0) {
		simple(0x1B, 0, 0, "unload");
		uint8_t cdb[12];
		move_medium_cdb(cdb, (unsigned)transport, (unsigned)drive_element, (unsigned)slot);
		scsi_free_scsi_task(good((int)changer, cdb, 12, SCSI_XFER_NONE, 0, NULL, "unload to the slot"));
	}
	free(pool);
	iscsi_logout_sync(iscsi);
	iscsi_destroy_context(iscsi);
	return 0;
}
