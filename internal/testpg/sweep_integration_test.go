//go:build integration

package testpg

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
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
