//go:build unix

package trinity

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// tryLock takes an exclusive flock(2) on f without waiting: ok is false
// when another open file holds it.
func tryLock(f *os.File) (ok bool, err error) {
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch err {
		case nil:
			return true, nil
		case syscall.EWOULDBLOCK:
			return false, nil
		case syscall.EINTR:
			continue
		}
		return false, err
	}
}

// lockHolder names, as " (process PID, NAME)", the first other process
// that holds a lock on path (a flock(2) or SQLite's POSIX locks), as Linux
// lists them in /proc/locks; "" where the system does not tell.
func lockHolder(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return ""
	}
	ino := st.Sys().(*syscall.Stat_t).Ino
	f, err := os.Open("/proc/locks")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a blocked
		// waiter's line has "->" after the number.
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[1] == "->" {
			continue
		}
		pid, err := strconv.Atoi(fs[4])
		dev := strings.Split(fs[5], ":")
		if err != nil || pid == os.Getpid() || len(dev) != 3 || dev[2] != strconv.FormatUint(ino, 10) {
			continue
		}
		name, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if n := strings.TrimSpace(string(name)); n != "" {
			return fmt.Sprintf(" (process %d, %s)", pid, n)
		}
		return fmt.Sprintf(" (process %d)", pid)
	}
	return ""
}
