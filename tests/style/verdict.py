"""How every style check ends: each violation on a line of its own, then a summary; exit
status 1 when there was one, 0 otherwise."""


def verdict(bad, failed, passed):
    """Print bad (lines), then failed (when any) or passed; the exit status."""
    for b in bad:
        print(b)
    print(failed if bad else passed)
    return 1 if bad else 0
