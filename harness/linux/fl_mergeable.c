/* fl-mergeable: run a node's command so that the kernel can share its memory with its peers'.
 *
 * A big lab runs the same programs hundreds of times (bgpd, zebra, the Python agents), and
 * most of each one's heap is the same bytes: FRR's command graph and northbound tree, Python's
 * imported modules. KSM (kernel samepage merging) stores such pages once, but only pages
 * that are byte for byte the same, and only in processes that asked for it. So this sets,
 * for the command and everything it starts:
 *   - PR_SET_MEMORY_MERGE: every anonymous page may be merged (kept across fork and exec);
 *   - ADDR_NO_RANDOMIZE: no address-space randomisation, so the pointers inside those heaps
 *     are the same in every copy (with it, only about a fifth of the pages match);
 *   - PYTHONHASHSEED=0: Python stores each string's hash in the string, so a random seed
 *     per process makes every page of strings differ.
 * harness/linux/ksm.py says when a lab does this and runs the kernel's merging thread.
 *
 *   fl-mergeable COMMAND [ARG]...
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef PR_SET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67 /* Linux 6.4; kept across execve since 6.7 */
#endif

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fl-mergeable COMMAND [ARG]...\n");
        return 2;
    }
    int persona = personality(0xffffffff);
    if (persona == -1 || personality(persona | ADDR_NO_RANDOMIZE) == -1) {
        fprintf(stderr, "fl-mergeable: personality: %s\n", strerror(errno));
        return 126;
    }
    if (prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0) != 0) {
        fprintf(stderr, "fl-mergeable: prctl(PR_SET_MEMORY_MERGE): %s (needs Linux 6.4)\n",
                strerror(errno));
        return 126;
    }
    if (setenv("PYTHONHASHSEED", "0", 1) != 0) {
        fprintf(stderr, "fl-mergeable: setenv: %s\n", strerror(errno));
        return 126;
    }
    execvp(argv[1], argv + 1);
    fprintf(stderr, "fl-mergeable: %s: %s\n", argv[1], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}
