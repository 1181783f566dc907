//go:build linux && !amd64 && !386

package testenv

import "syscall"

const sysSetns = syscall.SYS_SETNS
