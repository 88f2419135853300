// Command etcd-election-bench measures etcd v3's election (client/v3/concurrency) the way
// examples/examples/failover_bench measures kafka-coordination, as the anchor for its figures.
// Members are separate processes, each campaigning with a Session on a lease of TTL 3 s, and
// rounds alternate: the leader is SIGKILLed (even rounds) or resigns (odd rounds), and a fresh
// member process joins as the next standby. Two figures, wall clock in ms on one machine:
//
//   - hand-over after resign: the instant the successor's Campaign returned minus the instant
//     the leader's Resign began;
//   - failover overhead (SIGKILL): the instant the successor's Campaign returned minus the dead
//     leader's lease deadline, that is, the instant its last keepalive response arrived (or its
//     Grant's, if none had) plus the TTL that response gave.
//
// Subcommands:
//
//	etcd-election-bench server --dir D --client-url http://127.0.0.1:PORT [--unsafe-no-fsync]
//	etcd-election-bench member --endpoints URL[,URL] --name N --election E [--ttl 3]
//	etcd-election-bench bench [--failovers 20] [--ttl 3] [--unsafe-no-fsync]
//
// The server is a single-node etcd embedded with go.etcd.io/etcd/server/v3/embed; it prints
// "READY <unix ms> <url>". A member prints one line per event, each "EVENT <unix ms> ...": GRANT and
// KEEPALIVE (with the TTL granted), CAMPAIGN, ELECTED, RESIGN, RESIGNED, ENDED; once elected it
// resigns when it reads "resign" on stdin (or stdin closes). The bench runs the server and the
// members as child processes of its own and prints a summary in failover_bench's format.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: etcd-election-bench server|member|bench [options] (see the package comment)")
	}
	switch os.Args[1] {
	case "server":
		server(os.Args[2:])
	case "member":
		member(os.Args[2:])
	case "bench":
		bench(os.Args[2:])
	default:
		fail("unknown subcommand " + os.Args[1] + " (server, member or bench)")
	}
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, "etcd-election-bench:", message)
	os.Exit(1)
}

func check(err error, what string) {
	if err != nil {
		fail(what + ": " + err.Error())
	}
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err, "finding a free port")
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// server runs a single-node etcd until SIGTERM or SIGINT.
func server(args []string) {
	fs := flag.NewFlagSet("server", flag.ExitOnError)
	dir := fs.String("dir", "", "data directory (required)")
	clientURL := fs.String("client-url", "http://127.0.0.1:2379", "URL to serve clients on")
	noFsync := fs.Bool("unsafe-no-fsync", false, "never fsync (etcd's --unsafe-no-fsync)")
	_ = fs.Parse(args)
	if *dir == "" {
		fail("server: --dir is required")
	}
	cu, err := url.Parse(*clientURL)
	check(err, "--client-url")
	pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", freePort()))
	cfg := embed.NewConfig()
	cfg.Dir = *dir
	cfg.Name = "bench"
	cfg.LogLevel = "error"
	cfg.UnsafeNoFsync = *noFsync
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	check(err, "starting etcd")
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		fail("etcd was not ready within 60 s")
	}
	say("READY", *clientURL)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-e.Err():
		fail("etcd: " + err.Error())
	case <-stop:
		e.Close()
	}
}

// say prints one event line, stamped with the wall clock in unix milliseconds.
func say(event string, rest ...any) {
	fmt.Println(append([]any{event, time.Now().UnixMilli()}, rest...)...)
}

// member campaigns once, reports, and resigns when told to (or dies by SIGKILL).
func member(args []string) {
	fs := flag.NewFlagSet("member", flag.ExitOnError)
	endpoints := fs.String("endpoints", "http://127.0.0.1:2379", "comma-separated client URLs")
	name := fs.String("name", "", "this member's name (required)")
	election := fs.String("election", "/failover-bench", "the election's key prefix")
	ttl := fs.Int64("ttl", 3, "the session lease's TTL in seconds")
	_ = fs.Parse(args)
	if *name == "" {
		fail("member: --name is required")
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(*endpoints, ","),
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
	})
	check(err, "connecting")
	ctx := context.Background()
	// The session's lease is granted and kept alive here, so that every keepalive response is
	// seen: the session's own keepalive shares the same stream, and the responses go to both.
	grant, err := cli.Grant(ctx, *ttl)
	check(err, "granting the lease")
	say("GRANT", grant.TTL)
	kaCtx, stopKeepAlive := context.WithCancel(ctx)
	responses, err := cli.KeepAlive(kaCtx, grant.ID)
	check(err, "keeping the lease alive")
	go func() {
		for r := range responses {
			say("KEEPALIVE", r.TTL)
		}
		if kaCtx.Err() == nil {
			say("ENDED", "the lease was lost")
			os.Exit(1)
		}
	}()
	session, err := concurrency.NewSession(cli, concurrency.WithLease(grant.ID))
	check(err, "opening the session")
	e := concurrency.NewElection(session, *election)
	say("CAMPAIGN")
	check(e.Campaign(ctx, *name), "campaigning")
	say("ELECTED", e.Key(), e.Rev())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() && strings.TrimSpace(in.Text()) != "resign" {
	}
	say("RESIGN")
	err = e.Resign(ctx)
	say("RESIGNED", err)
	stopKeepAlive()
	_ = session.Close()
	_ = cli.Close()
}

// proc is a child process (the server or a member) whose stdout lines are read as events.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.Writer
	lines chan []string
	mu    sync.Mutex
	// The lease deadline of the last GRANT or KEEPALIVE line (unix ms), 0 before any.
	deadline int64
}

func spawn(name string, args ...string) *proc {
	exe, err := os.Executable()
	check(err, "finding this binary")
	p := &proc{name: name, cmd: exec.Command(exe, args...), lines: make(chan []string, 64)}
	p.cmd.Stderr = os.Stderr
	// A child dies with the bench, so that no member or server outlives it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.stdin, err = p.cmd.StdinPipe()
	check(err, name)
	stdout, err := p.cmd.StdoutPipe()
	check(err, name)
	check(p.cmd.Start(), "starting "+name)
	go func() {
		out := bufio.NewScanner(stdout)
		for out.Scan() {
			f := strings.Fields(out.Text())
			if len(f) >= 3 && (f[0] == "GRANT" || f[0] == "KEEPALIVE") {
				at, ttl := number(f[1]), number(f[2])
				p.mu.Lock()
				p.deadline = at + ttl*1000
				p.mu.Unlock()
				continue
			}
			p.lines <- f
		}
		close(p.lines)
	}()
	return p
}

func number(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	check(err, "a bad number in a member's line")
	return n
}

// expect waits for a line of the given event and returns its timestamp (its second field).
func (p *proc) expect(event string, within time.Duration) int64 {
	timeout := time.After(within)
	for {
		select {
		case f, ok := <-p.lines:
			if !ok {
				fail(fmt.Sprintf("%s exited before %s", p.name, event))
			}
			if len(f) >= 2 && f[0] == event {
				return number(f[1])
			}
		case <-timeout:
			fail(fmt.Sprintf("%s: no %s within %v", p.name, event, within))
		}
	}
}

// kill SIGKILLs the process, reads what it had printed, and returns its last lease deadline.
func (p *proc) kill() int64 {
	_ = p.cmd.Process.Kill()
	for range p.lines {
	}
	_ = p.cmd.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deadline
}

// stop reads the rest of the process's output and waits for it to exit.
func (p *proc) stop() {
	for range p.lines {
	}
	_ = p.cmd.Wait()
}

func bench(args []string) {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	failovers := fs.Int("failovers", 20, "rounds (kills and resigns alternate)")
	ttl := fs.Int64("ttl", 3, "the session lease's TTL in seconds")
	noFsync := fs.Bool("unsafe-no-fsync", false, "run etcd without fsync")
	_ = fs.Parse(args)
	if *failovers <= 0 {
		fail("--failovers must be positive")
	}
	dir, err := os.MkdirTemp("", "etcd-election-bench-")
	check(err, "a data directory")
	defer os.RemoveAll(dir)
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", freePort())
	serverArgs := []string{"server", "--dir", dir, "--client-url", endpoint}
	if *noFsync {
		serverArgs = append(serverArgs, "--unsafe-no-fsync")
	}
	srv := spawn("etcd server", serverArgs...)
	srv.expect("READY", 60*time.Second)
	defer srv.kill() // its data directory is thrown away
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, Logger: zap.NewNop()})
	check(err, "connecting")
	defer cli.Close()
	election := fmt.Sprintf("/failover-bench-%x", time.Now().UnixNano())
	fmt.Printf("etcd-election-bench: election %s on a single-node embedded etcd at %s (fsync %v); "+
		"session TTL %d s; %d rounds (kills and resigns alternate), member processes\n",
		election, endpoint, !*noFsync, *ttl, *failovers)

	next := 0
	newMember := func() *proc {
		name := fmt.Sprintf("p%d", next)
		next++
		return spawn(name, "member", "--endpoints", endpoint, "--name", name,
			"--election", election, "--ttl", strconv.FormatInt(*ttl, 10))
	}
	within := time.Duration(*ttl) * 3 * time.Second
	leader := newMember()
	leader.expect("ELECTED", 60*time.Second)
	var overheads, handovers []float64
	for round := 0; round < *failovers; round++ {
		// A member's keepalives tick every 500 ms from its start, and so does the server's
		// check for expired leases: a standby started right after an election would put its
		// lease's end at a fixed phase of that check. Start it at a random phase instead, as
		// in a deployment.
		time.Sleep(rand.N(500 * time.Millisecond))
		standby := newMember()
		// The standby must be waiting behind the leader's key before the leader goes.
		standby.expect("CAMPAIGN", 30*time.Second)
		waitForKeys(cli, election+"/", 2)
		time.Sleep(300 * time.Millisecond)
		if round%2 == 0 {
			killedAt := time.Now().UnixMilli()
			deadline := leader.kill()
			elected := standby.expect("ELECTED", within)
			overhead := elected - deadline
			fmt.Printf("round %3d kill:   %s SIGKILLed at %d, its lease ended at %d; %s elected "+
				"at %d: overhead %d ms\n", round, leader.name, killedAt, deadline, standby.name,
				elected, overhead)
			overheads = append(overheads, float64(overhead))
		} else {
			_, _ = leader.stdin.Write([]byte("resign\n"))
			began := leader.expect("RESIGN", 30*time.Second)
			elected := standby.expect("ELECTED", within)
			leader.expect("RESIGNED", 30*time.Second)
			leader.stop()
			fmt.Printf("round %3d resign: %s began to resign at %d; %s elected at %d: "+
				"hand-over %d ms\n", round, leader.name, began, standby.name, elected, elected-began)
			handovers = append(handovers, float64(elected-began))
		}
		leader = standby
	}
	_, _ = leader.stdin.Write([]byte("resign\n"))
	leader.expect("RESIGNED", 30*time.Second)
	leader.stop()

	fmt.Println()
	om, op := summary("failover overhead (ms)", overheads)
	hm, hp := summary("hand-over after resign (ms)", handovers)
	fmt.Printf("\nfailover overhead (SIGKILL): median %.0f ms, p90 %.0f ms\n", om, op)
	fmt.Printf("hand-over after resign: median %.0f ms, p90 %.0f ms\n", hm, hp)
}

// waitForKeys waits until the election's prefix holds n keys (the leader's and the standby's).
func waitForKeys(cli *clientv3.Client, prefix string, n int64) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		if err == nil && r.Count == n {
			return
		}
		if time.Now().After(deadline) {
			fail(fmt.Sprintf("the election %s never held %d keys", prefix, n))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// summary prints one line like failover_bench's, and returns the median and the p90.
func summary(name string, values []float64) (float64, float64) {
	if len(values) == 0 {
		fmt.Printf("%-28s (n=0)\n", name)
		return 0, 0
	}
	v := append([]float64(nil), values...)
	sort.Float64s(v)
	at := func(p float64) float64 { return v[int(float64(len(v)-1)*p+0.5)] }
	median, p90 := at(0.5), at(0.9)
	fmt.Printf("%-28s median %8.2f ms   p90 %8.2f ms   min %8.2f   max %8.2f   (n=%d)\n",
		name, median, p90, v[0], v[len(v)-1], len(v))
	return median, p90
}
