# Tries the system calls the seccomp filter refuses (x86-64 numbers) and prints
# "name errno" for each; the test expects EPERM (1) everywhere, ENOSYS (38) for clone3
# and for calls on no list ("unlisted_": the filter is an allow list, so a kernel interface
# nobody listed is closed by default) and EACCES (13) for socket.
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
calls = [
    ("unshare_user", 272, (0x10000000,)),
    ("unshare_net", 272, (0x40000000,)),
    ("clone_newuser", 56, (0x10000000 | 17, 0, 0, 0, 0)),
    ("clone_newns", 56, (0x00020000 | 17, 0, 0, 0, 0)),
    ("clone3", 435, (0, 0)),
    ("setns", 308, (0, 0)),
    ("mount", 165, (b"none", b"/tmp", b"tmpfs", 0, 0)),
    ("umount2", 166, (b"/proc", 0)),
    ("pivot_root", 155, (b"/tmp", b"/tmp")),
    ("ptrace", 101, (16, 1, 0, 0)),
    ("keyctl", 250, (0, 0)),
    ("add_key", 248, (b"user", b"x", b"y", 1, -2)),
    ("request_key", 249, (b"user", b"x", 0, 0)),
    ("bpf", 321, (0, 0, 0)),
    ("perf_event_open", 298, (0, 0, -1, -1, 0)),
    ("userfaultfd", 323, (0,)),
    ("io_uring_setup", 425, (1, 0)),
    ("process_vm_readv", 310, (1, 0, 0, 0, 0, 0)),
    ("open_by_handle_at", 304, (0, 0, 0)),
    ("kexec_load", 246, (0, 0, 0, 0)),
    ("init_module", 175, (0, 0, b"")),
    ("finit_module", 313, (0, b"", 0)),
    ("delete_module", 176, (b"x", 0)),
    ("reboot", 169, (0, 0, 0, 0)),
    ("swapon", 167, (b"/tmp/x", 0)),
    ("acct", 163, (0,)),
    ("modify_ldt", 154, (0, 0, 0)),
    ("socket_inet", 41, (2, 1, 0)),
    ("socket_unix", 41, (1, 1, 0)),
    ("socket_netlink", 41, (16, 3, 0)),
    ("unlisted_pkey_alloc", 330, (0, 0)),
    ("unlisted_landlock_create_ruleset", 444, (0, 0, 1)),
    ("unlisted_mq_open", 240, (b"/x", 0o100, 0o600, 0)),
    ("unlisted_fanotify_mark", 301, (0, 0, 0, 0, 0)),
]
for name, nr, args in calls:
    r = libc.syscall(nr, *args)
    print(name, 0 if r >= 0 else ctypes.get_errno())
