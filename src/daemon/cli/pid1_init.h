// The binary as a container's entrypoint: PID 1 of its PID namespace has duties an ordinary
// process has not. The kernel delivers it no signal it has no handler for (so `docker stop`'s
// SIGTERM would be lost on a process that relies on the default action), and every orphan of
// the namespace becomes its child (in Docker-in-Docker, containerd-shims whose parent exited):
// an init that does not wait() for them leaves zombies that fill the pid table.
#pragma once

namespace ci::daemon {

// When getpid() == 1: forks once. The child returns and runs the daemon as it would anywhere
// else (its own waitpid() of its own children undisturbed: the init never waits for a specific
// pid other than the child's). The parent never returns: it forwards SIGTERM, SIGINT, SIGHUP,
// SIGQUIT, SIGUSR1 and SIGUSR2 to the child, reaps every orphan, and exits with the child's
// status (128 + N when signal N killed it). Not PID 1: returns at once and does nothing.
void BecomeInitIfPid1();

}  // namespace ci::daemon
