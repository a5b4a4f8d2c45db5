# (filled in by the polkit test)
