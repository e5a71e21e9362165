package main

import "syscall"

// childAttr makes a child get SIGTERM if this process dies first.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
