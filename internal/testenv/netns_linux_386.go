package testenv

// The syscall package has no SYS_SETNS for 386 (arch/x86/entry/syscalls).
const sysSetns = 346
