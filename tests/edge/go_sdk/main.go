// gosdkpeer: a real OpenZiti Go SDK (sdk-golang v0.23.44) peer for ziti-lite's interop tests.
// It mirrors tests/edge/sdk_peer.py and prints JSON lines on stdout:
//
//	gosdkpeer host IDENTITY_JSON SERVICE NAME
//	    listens on SERVICE (waits until the router confirmed the terminator), prints {"event":"bound"};
//	    every accepted connection: the first line is echoed as NAME:line, then every byte is echoed
//	    back until the client's FIN, reported as {"event":"eof","bytes":N}; then the host closes its
//	    write side. A line "close" on stdin closes the listener: {"event":"unbound"}.
//	gosdkpeer dial IDENTITY_JSON SERVICE LINE
//	    dials, sends LINE\n, prints {"event":"echo","reply":...}, half-closes, and prints
//	    {"event":"closed","rest":...} once the host's FIN arrives.
//	gosdkpeer bulk IDENTITY_JSON SERVICE SIZE
//	    dials, sends "bulk\n", reads the prefixed line, then SIZE random bytes while reading the echo;
//	    prints {"event":"bulk","sent":sha256,"got":sha256,"n":N,"after":seconds}.
//	gosdkpeer binds IDENTITY_JSON SERVICE N
//	    N times in a row: listens on SERVICE waiting for the router's BindSuccess
//	    (WaitForNEstablishedListeners = 1), then closes the listener; prints
//	    {"event":"binds","ok":N_OK,"errors":[...]}.
//	gosdkpeer totpdial IDENTITY_JSON SERVICE LINE
//	    logs in, prints {"event":"authenticated"}, waits for a line "dial SECONDS" on stdin (the
//	    controller's clock is that far ahead of this one), then dials as "dial" does.
//
// With ZITI_TOTP_SECRET set, every TOTP code the SDK asks for (at login, and for TOTP tokens) is
// computed from that base32 secret (SHA-1, 6 digits, 30 s) at now + the offset given.
// Every failure: {"event":"error","op":...,"message":...}.
package main

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openziti/edge-api/rest_model"
	"github.com/openziti/sdk-golang/ziti"
	"github.com/openziti/sdk-golang/ziti/edge"
)

var totpOffset atomic.Int64 // seconds the controller's clock is ahead of ours

// totpCode is the RFC 6238 code of a base32 secret at t.
func totpCode(secret string, t time.Time) string {
	s := strings.ToUpper(secret)
	if m := len(s) % 8; m != 0 {
		s += strings.Repeat("=", 8-m)
	}
	key, _ := base32.StdEncoding.DecodeString(s)
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], uint64(t.Unix()/30))
	mac := hmac.New(sha1.New, key)
	mac.Write(msg[:])
	sum := mac.Sum(nil)
	off := sum[len(sum)-1] & 0x0f
	v := (binary.BigEndian.Uint32(sum[off:off+4]) & 0x7fffffff) % 1000000
	return fmt.Sprintf("%06d", v)
}

var outLock sync.Mutex

func say(ev map[string]any) {
	b, _ := json.Marshal(ev)
	outLock.Lock()
	defer outLock.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

func fail(op string, err error, start time.Time) {
	say(map[string]any{"event": "error", "op": op, "message": err.Error(),
		"after": time.Since(start).Seconds()})
	os.Exit(1)
}

func context(op, path string, start time.Time) ziti.Context {
	cfg, err := ziti.NewConfigFromFile(path)
	if err != nil {
		fail(op, err, start)
	}
	ctx, err := ziti.NewContext(cfg)
	if err != nil {
		fail(op, err, start)
	}
	if secret := os.Getenv("ZITI_TOTP_SECRET"); secret != "" {
		ctx.Events().AddMfaTotpCodeListener(func(_ ziti.Context, _ *rest_model.AuthQueryDetail, answer ziti.MfaCodeResponse) {
			at := time.Now().Add(time.Duration(totpOffset.Load()) * time.Second)
			say(map[string]any{"event": "totp-code"})
			// answered from another goroutine, as a user would: the SDK may emit the event
			// synchronously and read the answer only once the emit returned
			go func() { _ = answer(totpCode(secret, at)) }()
		})
	}
	if err := ctx.Authenticate(); err != nil {
		fail(op, err, start)
	}
	return ctx
}

// readLine reads byte by byte so that nothing after the newline is consumed.
func readLine(r io.Reader) ([]byte, error) {
	var buf []byte
	one := make([]byte, 1)
	for {
		n, err := r.Read(one)
		if n == 1 {
			buf = append(buf, one[0])
			if one[0] == '\n' {
				return buf, nil
			}
		}
		if err != nil {
			return buf, err
		}
	}
}

func serve(conn net.Conn, name string) {
	defer conn.Close()
	total := 0
	line, err := readLine(conn)
	total += len(line)
	if err == nil {
		_, err = conn.Write(append([]byte(name+":"), line...))
	}
	if err == nil {
		buf := make([]byte, 65536)
		for {
			n, rerr := conn.Read(buf)
			if n > 0 {
				total += n
				if _, werr := conn.Write(buf[:n]); werr != nil {
					err = werr
					break
				}
			}
			if rerr != nil {
				if rerr != io.EOF {
					err = rerr
				}
				break
			}
		}
	}
	if err != nil && err != io.EOF {
		say(map[string]any{"event": "host-error", "message": err.Error(), "bytes": total})
		return
	}
	say(map[string]any{"event": "eof", "bytes": total})
	if cw, ok := conn.(edge.CloseWriter); ok {
		_ = cw.CloseWrite()
	}
}

func host(path, service, name string) {
	start := time.Now()
	ctx := context("host", path, start)
	opts := ziti.DefaultListenOptions()
	opts.WaitForNEstablishedListeners = 1 // returns once the router sent BindSuccess
	opts.ConnectTimeout = 30 * time.Second
	opts.MaxTerminators = 1
	l, err := ctx.ListenWithOptions(service, opts)
	if err != nil {
		fail("host", err, start)
	}
	say(map[string]any{"event": "bound", "after": time.Since(start).Seconds()})
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "close" {
				err := l.Close()
				ev := map[string]any{"event": "unbound"}
				if err != nil {
					ev["message"] = err.Error()
				}
				say(ev)
			}
		}
	}()
	for {
		conn, err := l.Accept()
		if err != nil {
			if l.IsClosed() {
				select {} // keep the context (and its router channel) alive until killed
			}
			say(map[string]any{"event": "accept-error", "message": err.Error()})
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go serve(conn, name)
	}
}

func dial(path, service, line string) {
	start := time.Now()
	echo(context("echo", path, start), service, line, start)
}

func totpDial(path, service, line string) {
	start := time.Now()
	ctx := context("echo", path, start)
	say(map[string]any{"event": "authenticated", "after": time.Since(start).Seconds()})
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var seconds int64
		if _, err := fmt.Sscanf(sc.Text(), "dial %d", &seconds); err == nil {
			totpOffset.Store(seconds)
			break
		}
	}
	echo(ctx, service, line, start)
}

func echo(ctx ziti.Context, service, line string, start time.Time) {
	conn, err := ctx.Dial(service)
	if err != nil {
		fail("echo", err, start)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(line + "\n")); err != nil {
		fail("echo", err, start)
	}
	reply, err := readLine(conn)
	if err != nil {
		fail("echo", err, start)
	}
	say(map[string]any{"event": "echo", "reply": string(reply), "after": time.Since(start).Seconds()})
	if err := conn.CloseWrite(); err != nil {
		fail("echo", err, start)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	rest, err := io.ReadAll(conn)
	if err != nil {
		fail("closed", err, start)
	}
	say(map[string]any{"event": "closed", "rest": string(rest)})
}

func bulk(path, service string, size int) {
	start := time.Now()
	ctx := context("bulk", path, start)
	conn, err := ctx.Dial(service)
	if err != nil {
		fail("bulk", err, start)
	}
	defer conn.Close()
	payload := make([]byte, size)
	if _, err := rand.Read(payload); err != nil {
		fail("bulk", err, start)
	}
	if _, err := conn.Write([]byte("bulk\n")); err != nil {
		fail("bulk", err, start)
	}
	if _, err := readLine(conn); err != nil {
		fail("bulk", err, start)
	}
	type result struct {
		sum string
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		h := sha256.New()
		n, err := io.CopyN(h, conn, int64(size))
		done <- result{hex.EncodeToString(h.Sum(nil)), int(n), err}
	}()
	for i := 0; i < size; i += 32768 {
		end := min(i+32768, size)
		if _, err := conn.Write(payload[i:end]); err != nil {
			fail("bulk", err, start)
		}
	}
	sent := sha256.Sum256(payload)
	ev := map[string]any{"event": "bulk", "sent": hex.EncodeToString(sent[:])}
	select {
	case r := <-done:
		ev["got"], ev["n"] = r.sum, r.n
		if r.err != nil {
			ev["message"] = r.err.Error()
		}
	case <-time.After(120 * time.Second):
		ev["got"], ev["n"] = nil, nil
		ev["message"] = "timed out reading the echo"
	}
	ev["after"] = time.Since(start).Seconds()
	say(ev)
}

func binds(path, service string, n int) {
	start := time.Now()
	ctx := context("binds", path, start)
	ok, errs := 0, []string{}
	for i := 0; i < n; i++ {
		opts := ziti.DefaultListenOptions()
		opts.WaitForNEstablishedListeners = 1
		opts.ConnectTimeout = 10 * time.Second
		opts.MaxTerminators = 1
		l, err := ctx.ListenWithOptions(service, opts)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		ok++
		_ = l.Close()
	}
	say(map[string]any{"event": "binds", "ok": ok, "errors": errs, "after": time.Since(start).Seconds()})
}

func main() {
	if len(os.Args) < 5 {
		fmt.Fprintln(os.Stderr, "usage: gosdkpeer host|dial|totpdial|bulk|binds IDENTITY SERVICE NAME|LINE|SIZE|N")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "host":
		host(os.Args[2], os.Args[3], os.Args[4])
	case "dial":
		dial(os.Args[2], os.Args[3], os.Args[4])
	case "totpdial":
		totpDial(os.Args[2], os.Args[3], os.Args[4])
	case "binds":
		n, err := strconv.Atoi(os.Args[4])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		binds(os.Args[2], os.Args[3], n)
	case "bulk":
		size, err := strconv.Atoi(os.Args[4])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		bulk(os.Args[2], os.Args[3], size)
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %s\n", os.Args[1])
		os.Exit(2)
	}
}
