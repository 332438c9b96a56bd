package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// printKeys writes the keys, one "name value" line each, then how the
// diagnostic tools take them.
func printKeys(w io.Writer, k opensm.Keys) error {
	_, err := fmt.Fprintf(w, `%s %s
%s %s
%s %s
# These keys protect the fabric: keep them as secret as the database.
# Tools that send SMPs need the M_Key, for example:
#   smpquery -y %s portinfo -G <switch GUID> <port>
#   ibnetdiscover -y %s
# Trusted SA queries need the SA key:
#   saquery --smkey %s PIR
`, opensm.SecretMKey, opensm.FormatKey(k.MKey), opensm.SecretSMKey, opensm.FormatKey(k.SMKey), opensm.SecretSAKey, opensm.FormatKey(k.SAKey),
		opensm.FormatKey(k.MKey), opensm.FormatKey(k.MKey), opensm.FormatKey(k.SAKey))
	return err
}

var _ opensm.SecretStore = (*store.Store)(nil)

// keysCommand is --import-keys FILE [--replace-keys], or --rotate-keys NAMES.
type keysCommand struct {
	importFile string // an opensm.conf another manager wrote
	replace    bool   // the import may replace recorded keys
	rotate     string // key names, separated by commas
	fabric     string // the fabric whose keys these are (--fabric)
}

// runKeys imports or rotates OpenSM's keys in the database, in one
// transaction, printing what it did (never a key). The running managers
// write the keys into opensm.conf when they start: the output says so.
func runKeys(ctx context.Context, path string, log *slog.Logger, c keysCommand) error {
	if c.replace && c.importFile == "" {
		return errors.New("--replace-keys goes with --import-keys")
	}
	var conf opensm.ConfKeys
	var rotate opensm.KeyRotation
	var err error
	if c.importFile != "" {
		if conf, err = readConfKeys(c.importFile); err != nil {
			return err
		}
	} else if rotate, err = opensm.ParseKeyRotation(c.rotate); err != nil {
		return fmt.Errorf("--rotate-keys: %w", err)
	}
	return withOperatorStore(ctx, path, c.fabric, log, changing(func(ctx context.Context, f operatorFabric, st *store.Store) error {
		recorded, err := st.Secrets(ctx)
		if err != nil {
			return err
		}
		var values map[string]string
		var done []string
		if c.importFile != "" {
			values, done, err = opensm.PlanImport(recorded, conf, f.cfg.OpenSM.Hardening, c.importFile, c.replace)
		} else {
			values, done, err = rotate.Plan(recorded)
		}
		if err != nil {
			return err
		}
		if _, err := st.SetSecrets(ctx, values, c.replace || c.importFile == ""); errors.Is(err, store.ErrSecretsDiffer) {
			return fmt.Errorf("%w: %s", err, opensm.KeysRecordedHint) // another command, or a manager's first start, came first
		} else if err != nil {
			return err
		}
		fmt.Fprintf(os.Stdout, "%s\n# The leading manager keeps its keys until it restarts; a follower takes these when it next leads: docs/key-rotation.md.\n",
			strings.Join(done, "\n"))
		return nil
	}))
}

// readConfKeys reads the keys an opensm.conf sets.
func readConfKeys(file string) (opensm.ConfKeys, error) {
	f, err := os.Open(file)
	if err != nil {
		return opensm.ConfKeys{}, fmt.Errorf("--import-keys: %w", err)
	}
	defer f.Close()
	conf, err := opensm.ReadConfKeys(f)
	if err != nil {
		return opensm.ConfKeys{}, fmt.Errorf("--import-keys %s: %w", file, err)
	}
	return conf, nil
}
