package fabricsim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Run runs a program (any infiniband-diags tool) inside the fabric: with the
// fabric's environment and the fabric directory as working directory. It
// returns what the program wrote on stdout; stderr goes into the error.
func (f *Fabric) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	path, err := LookPath(name)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = f.Dir
	cmd.Env = append(os.Environ(), f.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// PKeys returns the non-zero entries of a port's P_Key table, in table order
// (0x8000 set: full member). It asks the port with SMPs, addressed by the LID
// OpenSM gave it, so an SM must have swept the fabric.
func (f *Fabric) PKeys(ctx context.Context, port fabric.GUID) ([]uint16, error) {
	lid, err := f.LID(port)
	if err != nil {
		return nil, err
	}
	return f.smpClient().pkeys(ctx, lid, 0)
}

// SwitchPKeys returns the non-zero P_Keys of the switch port facing a host:
// where OpenSM puts the keys a switch enforces.
func (f *Fabric) SwitchPKeys(ctx context.Context, host fabric.GUID) ([]uint16, error) {
	lid, port, err := f.switchPortFacing(host)
	if err != nil {
		return nil, err
	}
	return f.smpClient().pkeys(ctx, lid, port)
}

// switchPortFacing is the LID of the switch a host is cabled to and the port.
func (f *Fabric) switchPortFacing(host fabric.GUID) (lid, port int, err error) {
	var h *Host
	for i := range f.Hosts {
		if f.Hosts[i].PortGUID == host {
			h = &f.Hosts[i]
		}
	}
	if h == nil {
		return 0, 0, fmt.Errorf("%s is not a host of this fabric", host)
	}
	lid, err = f.LID(h.SwitchGUID)
	return lid, h.SwitchPort, err
}

// smpClient is the fabric's connection to the simulator for reading P_Key
// tables; it attaches to the simulator at its first read.
func (f *Fabric) smpClient() *smpClient {
	f.smpOnce.Do(func() {
		f.smp = &smpClient{sock: f.envValue("IBSIM_SOCKNAME"), node: f.envValue("SIM_HOST")}
	})
	return f.smp
}

// envValue is a variable of the fabric's environment.
func (f *Fabric) envValue(key string) string {
	for _, line := range f.env {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return v
		}
	}
	return ""
}

// pkeysBySMPQuery reads a P_Key table as an operator would, with smpquery:
// what the tests compare the fabric's own reads with.
func (f *Fabric) pkeysBySMPQuery(ctx context.Context, lid int, port ...int) ([]uint16, error) {
	args := []string{"pkeys", strconv.Itoa(lid)}
	for _, p := range port {
		args = append(args, strconv.Itoa(p))
	}
	out, err := f.Run(ctx, "smpquery", args...)
	if err != nil {
		return nil, err
	}
	return parsePKeyTable(out)
}

// LID returns the LID OpenSM assigned to a port (for a switch: its node GUID),
// from OpenSM's cache in the fabric directory. OpenSM rewrites the cache after
// each sweep.
func (f *Fabric) LID(port fabric.GUID) (int, error) {
	lines, err := readLines(filepath.Join(f.Dir, lidCacheFileName))
	if err != nil {
		return 0, fmt.Errorf("LID of %s: %w (has an SM swept the fabric?)", port, err)
	}
	for _, l := range lines {
		// "<guid> <base lid> <max lid>", all hexadecimal
		fields := strings.Fields(l)
		if len(fields) < 2 {
			continue
		}
		g, err := fabric.ParseGUID(strings.ToLower(fields[0]))
		if err != nil || g != port {
			continue
		}
		lid, err := strconv.ParseUint(strings.TrimPrefix(fields[1], "0x"), 16, 16)
		if err != nil {
			return 0, fmt.Errorf("LID of %s: %q in %s: %w", port, fields[1], lidCacheFileName, err)
		}
		return int(lid), nil
	}
	return 0, fmt.Errorf("LID of %s: not in %s (not on the fabric, or not swept yet)", port, lidCacheFileName)
}

// pkeyRow is a row of smpquery's table: "   8: 0x7fff 0x0000 ...".
var pkeyRow = regexp.MustCompile(`^\s*\d+:((?:\s+0x[0-9a-fA-F]{4})+)\s*$`)

func parsePKeyTable(out []byte) ([]uint16, error) {
	var keys []uint16
	rows := 0
	for _, line := range strings.Split(string(out), "\n") {
		m := pkeyRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rows++
		for _, field := range strings.Fields(m[1]) {
			v, err := strconv.ParseUint(field[2:], 16, 16)
			if err != nil {
				return nil, fmt.Errorf("P_Key %q: %w", field, err)
			}
			if v != 0 {
				keys = append(keys, uint16(v))
			}
		}
	}
	if rows == 0 {
		return nil, fmt.Errorf("no P_Key table in smpquery's output: %q", out)
	}
	return keys, nil
}

// simPrompt is what ibsim's console prints after each command.
const simPrompt = "sim> "

// Sim sends one command to ibsim's console and returns its answer (empty for
// most commands). See the package documentation for the useful commands; "help"
// lists all.
func (f *Fabric) Sim(ctx context.Context, command string) (string, error) {
	if strings.ContainsAny(command, "\n\r") {
		return "", errors.New("ibsim command: one line only")
	}
	f.simMu.Lock()
	defer f.simMu.Unlock()
	if !f.IbsimRunning() {
		return "", errors.New("ibsim is not running")
	}
	logPath := filepath.Join(f.Dir, ibsimLogFileName)
	fi, err := os.Stat(logPath)
	if err != nil {
		return "", fmt.Errorf("ibsim command: %w", err)
	}
	answerFrom := fi.Size()

	// Non-blocking: with nobody reading the FIFO, open fails instead of hanging.
	ctl, err := os.OpenFile(filepath.Join(f.Dir, ibsimCtlFileName), os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("ibsim console: %w", err)
	}
	_, err = io.WriteString(ctl, command+"\n")
	ctl.Close()
	if err != nil {
		return "", fmt.Errorf("ibsim console: %w", err)
	}

	// The answer is complete when the next prompt is out.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		answer, err := readFrom(logPath, answerFrom)
		if err != nil {
			return "", fmt.Errorf("ibsim answer: %w", err)
		}
		if strings.HasSuffix(answer, simPrompt) {
			return strings.TrimSpace(strings.ReplaceAll(answer, simPrompt, "")), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("ibsim did not answer %q: %w", command, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func readFrom(path string, offset int64) (string, error) {
	file, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer file.Close()
	if _, err := file.Seek(offset, io.SeekStart); err != nil {
		return "", err
	}
	data, err := io.ReadAll(file)
	return string(data), err
}
