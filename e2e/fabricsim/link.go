package fabricsim

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Unlink takes every link of node ("S2", "H1") down. The switch ports at the
// other ends send trap 128 and OpenSM sweeps by itself.
func (f *Fabric) Unlink(ctx context.Context, node string) error {
	return f.linkCommand(ctx, "Unlink", node)
}

// Relink brings the links Unlink took down up again.
func (f *Fabric) Relink(ctx context.Context, node string) error {
	return f.linkCommand(ctx, "ReLink", node)
}

// linkCommand sends a link command to ibsim's console (trapCommand).
func (f *Fabric) linkCommand(ctx context.Context, verb, node string) error {
	if node == "" || strings.ContainsAny(node, "\"\n\r[]") {
		return fmt.Errorf("ibsim %s: node name %q: want a name such as \"S2\"", verb, node)
	}
	return f.trapCommand(ctx, fmt.Sprintf("%s %q", verb, node))
}

// Link cables port fromPort of node from to port toPort of node to (both
// ports free, say after Unlink): the switch sends trap 128 and OpenSM sweeps
// by itself, finding whatever is at the other end.
func (f *Fabric) Link(ctx context.Context, from string, fromPort int, to string, toPort int) error {
	for _, node := range []string{from, to} {
		if node == "" || strings.ContainsAny(node, "\"\n\r[]") {
			return fmt.Errorf("ibsim Link: node name %q: want a name such as \"S2\"", node)
		}
	}
	return f.trapCommand(ctx, fmt.Sprintf("Link %q[%d] %q[%d]", from, fromPort, to, toPort))
}

// trapCommand sends a command that makes ibsim send traps to its console.
// Unlike Sim, it does not wait for the console to fall silent: ibsim logs the
// traps it sends after the prompt, so the command is done once a prompt
// follows it.
func (f *Fabric) trapCommand(ctx context.Context, command string) error {
	f.simMu.Lock()
	defer f.simMu.Unlock()
	if !f.IbsimRunning() {
		return fmt.Errorf("ibsim %s: ibsim is not running", command)
	}
	logPath := filepath.Join(f.Dir, ibsimLogFileName)
	fi, err := os.Stat(logPath)
	if err != nil {
		return fmt.Errorf("ibsim %s: %w", command, err)
	}
	ctl, err := os.OpenFile(filepath.Join(f.Dir, ibsimCtlFileName), os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("ibsim console: %w", err)
	}
	_, err = io.WriteString(ctl, command+"\n")
	ctl.Close()
	if err != nil {
		return fmt.Errorf("ibsim console: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		answer, err := readFrom(logPath, fi.Size())
		if err != nil {
			return fmt.Errorf("ibsim answer: %w", err)
		}
		if strings.Contains(answer, simPrompt) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ibsim did not answer %s: %w", command, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
