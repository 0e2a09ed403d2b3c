// SPDX-License-Identifier: GPL-2.0
/*
 * sidr_flood: a hostile UD peer for tests/t_safety.sh. Sends N SIDR REQs
 * (rdma_cm's UD address resolution: RDMA_PS_UDP ids, rdma_connect) to
 * ADDR:PORT, one id each, all in flight together, and counts how each was
 * answered, without stopping at the first answer as udaddy does:
 *
 *   sidr_flood ADDR PORT N SECONDS
 *   -> "sent S rejected R unsupported U accepted A timedout T errors E"
 *
 * rejected: a SIDR REP with IB_SIDR_REJECT (status 2); unsupported: status
 * 1 (no listener); accepted: a SIDR REP with success; timedout: no answer
 * within SECONDS (or the CM's own -ETIMEDOUT); errors: anything else.
 *
 * Built against librdmacm (rdma-core's librdmacm-dev): by the selftests'
 * make in a kernel tree, in the guest out of tree (tests/t_safety.sh).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <rdma/rdma_cma.h>

int main(int argc, char **argv)
{
	int n, secs, i, done = 0, sent = 0, rej = 0, unsup = 0, acc = 0, tmo = 0, err = 0;
	struct rdma_event_channel *ch;
	struct rdma_cm_id **ids;
	struct sockaddr_in dst = { .sin_family = AF_INET };
	time_t end;

	if (argc != 5) {
		fprintf(stderr, "usage: %s ADDR PORT N SECONDS\n", argv[0]);
		return 2;
	}
	inet_pton(AF_INET, argv[1], &dst.sin_addr);
	dst.sin_port = htons(atoi(argv[2]));
	n = atoi(argv[3]);
	secs = atoi(argv[4]);
	ids = calloc(n, sizeof(*ids));
	ch = rdma_create_event_channel();
	if (!ids || !ch) {
		perror("sidr_flood: setup");
		return 1;
	}
	for (i = 0; i < n; i++) {
		if (rdma_create_id(ch, &ids[i], NULL, RDMA_PS_UDP) ||
		    rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&dst, 5000)) {
			perror("sidr_flood: create/resolve");
			return 1;
		}
	}
	end = time(NULL) + secs;
	while (done < n && time(NULL) < end) {
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };
		struct rdma_cm_event *ev;
		struct rdma_conn_param param;

		if (poll(&p, 1, 500) <= 0)
			continue;
		if (rdma_get_cm_event(ch, &ev))
			break;
		switch (ev->event) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			if (rdma_resolve_route(ev->id, 5000)) {
				err++;
				done++;
			}
			break;
		case RDMA_CM_EVENT_ROUTE_RESOLVED:
			memset(&param, 0, sizeof(param));
			if (rdma_connect(ev->id, &param)) {
				err++;
				done++;
			} else {
				sent++;
			}
			break;
		case RDMA_CM_EVENT_UNREACHABLE:
			if (ev->status == 2)
				rej++;
			else if (ev->status == 1)
				unsup++;
			else if (ev->status == -ETIMEDOUT)
				tmo++;
			else
				err++;
			done++;
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			acc++;
			done++;
			break;
		default:
			fprintf(stderr, "sidr_flood: event %d status %d\n",
				ev->event, ev->status);
			err++;
			done++;
			break;
		}
		rdma_ack_cm_event(ev);
	}
	tmo += n - done;
	printf("sent %d rejected %d unsupported %d accepted %d timedout %d errors %d\n",
	       sent, rej, unsup, acc, tmo, err);
	fflush(stdout);
	/* Ids still waiting are cancelled on exit (the fd's release). */
	return 0;
}
