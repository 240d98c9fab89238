"""Peak memory of a peer process, shared by the peer scripts in this folder."""


def peak_rss_mb():
    """This process's peak RSS (VmHWM). Not getrusage's ru_maxrss: Linux carries that over
    exec from the parent's address space, so a child of a large parent reports the parent's
    peak."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")
