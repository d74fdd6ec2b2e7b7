//go:build !linux

package envlease

func pidNamespace() string { return "" }

func procZombie(pid int) bool { return false }

func procStartMs(pid int) (int64, bool) { return 0, false }
