// SPDX-License-Identifier: GPL-2.0
/*
 * rcd_kmsg: a test's kernel log without reading the whole log at each look
 * (tests/lib.sh: dmesg_test, dmesg_count, dmesg_has; tests poll them).
 * dmesg and an awk over a log of some thousand lines cost the debug guest
 * about a second of its vCPU under TCG.
 *
 *   rcd_kmsg MARK FILE < /dev/kmsg
 *
 * Reads the records its standard input has not given yet: the test's
 * shells share one open /dev/kmsg, and with it one position in the log.
 * Appends their lines to FILE as dmesg prints them ("[    5.000001] text");
 * a record that contains MARK empties FILE instead, so FILE holds what came
 * after the last MARK. Does not wait for new records. Exits 0, or 1 with
 * the error on stderr (2: usage).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A record: "LEVEL,SEQ,USEC,FLAGS[,...];TEXT\n", then " KEY=VALUE" lines. */
static char rec[8192 + 1];
static char *out;
static size_t len, cap;

/* TEXT with the kernel's \xNN escapes undone, as dmesg prints it. */
static size_t unescape(char *s)
{
	char *r = s, *w = s, hex[3] = "";

	while (*r) {
		if (r[0] == '\\' && r[1] == 'x' && r[2] && r[3]) {
			hex[0] = r[2];
			hex[1] = r[3];
			*w++ = (char)strtol(hex, NULL, 16);
			r += 4;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
	return w - s;
}

static int append(unsigned long long usec, const char *text, size_t n)
{
	size_t need = len + n + 32;

	if (need > cap) {
		cap = need * 2;
		out = realloc(out, cap);
		if (!out)
			return -1;
	}
	len += sprintf(out + len, "[%5llu.%06llu] ", usec / 1000000, usec % 1000000);
	memcpy(out + len, text, n);
	len += n;
	out[len++] = '\n';
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long long usec;
	int fl, fd, empty = 0;
	char *text, *nl;
	size_t off;
	ssize_t r;

	if (argc != 3) {
		fprintf(stderr, "usage: rcd_kmsg MARK FILE < /dev/kmsg\n");
		return 2;
	}
	fl = fcntl(0, F_GETFL);
	if (fl < 0 || fcntl(0, F_SETFL, fl | O_NONBLOCK) < 0) {
		perror("rcd_kmsg: standard input");
		return 1;
	}
	for (;;) {
		r = read(0, rec, sizeof(rec) - 1);
		if (r < 0 && (errno == EINTR || errno == EPIPE))
			continue;	/* EPIPE: overwritten; the next one follows */
		if (r < 0 && errno == EAGAIN)
			break;
		if (r < 0) {
			perror("rcd_kmsg: read");
			return 1;
		}
		if (r == 0)
			break;
		rec[r] = '\0';
		text = strchr(rec, ';');
		if (!text || sscanf(rec, "%*u,%*u,%llu", &usec) != 1)
			continue;
		text++;
		nl = strchr(text, '\n');
		if (nl)
			*nl = '\0';
		if (strstr(text, argv[1])) {
			len = 0;
			empty = 1;
			continue;
		}
		if (append(usec, text, unescape(text)) < 0) {
			perror("rcd_kmsg");
			return 1;
		}
	}
	fd = open(argv[2], O_WRONLY | O_CREAT | (empty ? O_TRUNC : O_APPEND), 0644);
	if (fd < 0) {
		perror(argv[2]);
		return 1;
	}
	for (off = 0; off < len; off += r) {
		r = write(fd, out + off, len - off);
		if (r < 0) {
			perror(argv[2]);
			return 1;
		}
	}
	return close(fd) ? 1 : 0;
}
