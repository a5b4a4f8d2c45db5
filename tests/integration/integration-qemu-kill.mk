# (filled in by the qemu-kill test)
