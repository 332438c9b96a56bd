package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// checkRecordedState renders the recorded state with the configuration and
// checks it, as the applier will. It returns the file, or an error that lists
// every recorded network and Kubernetes pkey the configuration would now
// refuse (which one, its pkey and the rule) and every problem of the check, one per line: what
// --render prints and what refuses the manager's start.
func checkRecordedState(ctx context.Context, cfg *config.Config, st *store.Store, tpl *partitions.Template,
	flavour fabric.Flavour) ([]byte, error) {
	snap, err := st.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("read recorded state: %w", err)
	}
	// The capacity leaves out what the applier leaves out (it needs no dump);
	// a template that fails says so in the render's words.
	static, serr := tpl.Static(ctx, cfg.OpenSM.DefaultPartition, cfg.OpenSM.FlatPKey)
	var limit applier.CapacityChecker
	if serr == nil {
		limit = &topology.PortLimit{Capacity: cfg.OpenSM.SwitchPKeyCapacity, Static: static.PKeysOf}
	}
	_, text, err, rerr := applier.Render(ctx, snap, applier.Config{DefaultPartition: cfg.OpenSM.DefaultPartition,
		FlatPKey: cfg.OpenSM.FlatPKey, Template: tpl, Rules: checkRules(cfg, flavour), PortLimit: limit})
	if rerr != nil {
		return nil, fmt.Errorf("revision %d: %w", snap.Revision, rerr)
	}
	perr := (*partitions.Error)(nil)
	if err != nil && !errors.As(err, &perr) {
		return nil, fmt.Errorf("revision %d: %w", snap.Revision, err)
	}
	if serr != nil {
		return nil, fmt.Errorf("[opensm] partitions_template: %w", serr)
	}
	rules := storeRules(cfg)
	rules.StaticPKey = static.Name
	conflicts := append(rules.Conflicts(snap.Networks), rules.KubernetesConflicts(snap.Kubernetes)...)
	problems := conflicts
	omitted := 0
	if errors.As(err, &perr) {
		for _, p := range perr.Problems {
			problems = append(problems, p.String())
		}
		omitted = perr.Omitted
	} else if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) == 0 {
		return text, nil
	}
	var b strings.Builder
	for _, p := range problems {
		fmt.Fprintf(&b, "\n  %s", p)
	}
	if omitted > 0 {
		fmt.Fprintf(&b, "\n  and %d more", omitted)
	}
	if len(conflicts) > 0 {
		b.WriteString("\n  (the configuration changed under these networks or Kubernetes pkeys: change it back, or delete them)")
	}
	return nil, fmt.Errorf("revision %d renders to a file that fails the check:%s", snap.Revision, b.String())
}
