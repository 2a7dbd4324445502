//go:build integration

package testpg

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHelperOrphan is not a test: TestStartStopsOrphans runs it in a child process,
// which starts a server, prints it and waits to be killed.
func TestHelperOrphan(t *testing.T) {
	if os.Getenv("ORDERLY_TESTPG_ORPHAN") != "1" {
		t.Skip("only run as TestStartStopsOrphans' child")
	}
	s, err := Start()
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Printf("server %d %s\n", s.Port, s.cluster.Dir)
	time.Sleep(time.Hour)
}

// A test process killed before Close leaves its server running (pg_ctl detaches
// it); the next Start stops it and removes its files.
func TestStartStopsOrphans(t *testing.T) {
	child := exec.Command(os.Args[0], "-test.run=^TestHelperOrphan$", "-test.v")
	child.Env = append(os.Environ(), "ORDERLY_TESTPG_ORPHAN=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var port int
	var dir string
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "server ") {
			if _, err := fmt.Sscanf(sc.Text(), "server %d %s", &port, &dir); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if dir == "" {
		_ = child.Process.Kill()
		t.Fatal("the child process started no server")
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("the orphan should still run after its process died: %v", err)
	}
	_ = conn.Close()

	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the orphan's directory %s is still there (stat: %v)", dir, err)
	}
	if conn, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		_ = conn.Close()
		t.Errorf("the orphan still accepts connections on %s", addr)
	}
}

// A descriptor the test process inherited without close-on-exec (what `flock CMD`
// passes to CMD) does not reach the server, which outlives the process when it is
// killed and would hold the lock for everyone else.
func TestServerInheritsNoDescriptors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "held.lock")
	fd, err := syscall.Open(path, syscall.O_CREAT|syscall.O_RDWR, 0o600) // no O_CLOEXEC, like an inherited one
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pidFile, err := os.ReadFile(filepath.Join(s.cluster.DataDir(), "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.SplitN(string(pidFile), "\n", 2)[0]
	fds, err := os.ReadDir(filepath.Join("/proc", pid, "fd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range fds {
		if target, err := os.Readlink(filepath.Join("/proc", pid, "fd", e.Name())); err == nil && target == path {
			t.Fatalf("the server (pid %s) holds %s as fd %s", pid, path, e.Name())
		}
	}
}
