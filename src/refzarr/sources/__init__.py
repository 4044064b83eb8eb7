"""Sources that change: what a scan records about its files (`record`), comparing it with the
files now (`check`), and scanning again only the files that changed (`refresh`)."""
