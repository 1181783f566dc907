package testenv

// The syscall package has no SYS_SETNS for amd64 (arch/x86/entry/syscalls).
const sysSetns = 308
