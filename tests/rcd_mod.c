// SPDX-License-Identifier: GPL-2.0
/*
 * rcd_mod: insmod and rmmod for the suite's hot paths (tests/lib.sh:
 * mod_insert, mod_remove): the harness is loaded and unloaded around every
 * test. kmod's insmod and rmmod link libcrypto, libzstd and liblzma, and
 * under TCG on the debug kernel each start cost about 0.3 s of the guest's
 * vCPU; this one, linked statically, about half of that.
 *
 *   rcd_mod insert FILE [PARAM...]   finit_module(2) of FILE
 *   rcd_mod remove NAME              delete_module(2), O_NONBLOCK (as
 *                                    rmmod: a module in use is not waited
 *                                    for, EWOULDBLOCK)
 *
 * Exits 0, or 1 with the errno's text on stderr (2: usage).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int insert_module(const char *file, int argc, char **argv)
{
	char params[4096] = "";
	size_t n = 0, l;
	int fd, i;

	for (i = 0; i < argc; i++) {
		l = strlen(argv[i]);
		if (n + l + 2 > sizeof(params)) {
			fprintf(stderr, "rcd_mod: parameters too long\n");
			return 2;
		}
		if (n)
			params[n++] = ' ';
		memcpy(params + n, argv[i], l + 1);
		n += l;
	}
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || syscall(SYS_finit_module, fd, params, 0)) {
		fprintf(stderr, "rcd_mod: insert %s: %s\n", file, strerror(errno));
		return 1;
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "insert"))
		return insert_module(argv[2], argc - 3, argv + 3);
	if (argc == 3 && !strcmp(argv[1], "remove")) {
		if (syscall(SYS_delete_module, argv[2], O_NONBLOCK)) {
			fprintf(stderr, "rcd_mod: remove %s: %s\n", argv[2], strerror(errno));
			return 1;
		}
		return 0;
	}
	fprintf(stderr, "usage: rcd_mod insert FILE [PARAM...] | rcd_mod remove NAME\n");
	return 2;
}
