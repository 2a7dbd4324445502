//go:build integration

package testmysql

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"orderly.dev/orderly/internal/localproc"
)

func TestStartServesTheAdminAndCloseRemovesEverything(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	db, err := s.Admin("")
	if err != nil {
		t.Fatal(err)
	}
	var grants string
	if err := db.QueryRowContext(context.Background(), "SHOW GRANTS").Scan(&grants); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	if !strings.Contains(grants, "ALL PRIVILEGES ON *.*") || !strings.Contains(grants, "WITH GRANT OPTION") {
		t.Errorf("the admin's grants: %s", grants)
	}
	pid := s.Pid()
	s.Close()
	if localproc.Alive(pid) {
		t.Error("the server runs on after Close")
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("the server's directory is left: %v", err)
	}
}

// A test process killed at its timeout (SIGKILL: no Close, no deferred code) takes
// its server with it.
func TestAKilledTestLeavesNoServerRunning(t *testing.T) {
	if os.Getenv("TESTMYSQL_CHILD") == "1" {
		s, err := Start()
		if err != nil {
			t.Fatal(err)
		}
		println("PID", s.Pid())
		select {} // until killed
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestAKilledTestLeavesNoServerRunning$", "-test.timeout", "5m")
	cmd.Env = append(os.Environ(), "TESTMYSQL_CHILD=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := 0
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "PID" {
			pid, _ = strconv.Atoi(f[1])
			break
		}
	}
	if pid == 0 {
		t.Fatal("the child did not start a server")
	}
	if !localproc.Alive(pid) {
		t.Fatal("the child's server is not running")
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for localproc.Alive(pid) && !zombie(pid) {
		if time.Now().After(deadline) {
			t.Fatal("the server of a killed test process still runs")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The next Start sweeps the dead test's directory.
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// zombie is true when pid has exited and waits to be reaped (by init).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] == "Z"
}

// Stop makes the server unreachable and StartAgain brings it back with its data,
// on the same port, so that tests can show a server that is down for a while.
func TestStopAndStartAgainKeepTheData(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ping := func() error {
		db, err := s.Admin("")
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return db.PingContext(ctx)
	}
	db, err := s.Admin("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE DATABASE kept"); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if ping() == nil {
		t.Fatal("the server answers after Stop")
	}
	if err := s.StartAgain(); err != nil {
		t.Fatal(err)
	}
	if err := ping(); err != nil {
		t.Fatalf("after StartAgain: %v", err)
	}
	db, err = s.Admin("kept")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if err := db.Ping(); err != nil {
		t.Errorf("the data did not survive: %v", err)
	}
}
