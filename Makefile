# Development tasks. `make` (or `make help`) lists them; each runs a script in scripts/.

.DEFAULT_GOAL := help
.PHONY: help test generate verify demo bench soak release deps

help: ## list the targets
	@awk -F ':.*## ' '/^[a-z][a-z-]*:.*## / { printf "  make %-9s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

test: ## what CI runs: install and start the test servers, vet, gofmt, staticcheck, function lengths, sqlc diff, every test suite, fuzz smoke
	bash scripts/test.sh

generate: ## regenerate db/ from queries/ and migrations/ (sqlc; installs it if needed), then the engines' query adapters
	bash scripts/sqlc.sh generate
	go generate ./internal/store/...

verify: ## check that db/ and the query adapters match their sources (sqlc diff, adaptergen), then go vet, gofmt, staticcheck and function lengths
	bash scripts/sqlc.sh diff
	go test -count=1 -run TestCommittedAdapters ./internal/store/driver/adaptergen
	bash scripts/lint.sh

demo: ## run the manager on a simulated fabric; DEMO_SCRIPTED=1 sends the requests and checks them
	bash scripts/demo.sh

bench: ## benchmark suite on all engines (minutes): prints a Markdown table, writes docs/performance-table.md
	bash scripts/bench.sh $(BENCH_FLAGS)

soak: ## randomized, model-checked run with faults on all engines (minutes): SOAK_FLAGS='--ops 500 --seed 42'
	bash scripts/soak.sh $(SOAK_FLAGS)

release: ## dist/: binaries, .debs, SBOM, image archive, SHA256SUMS; VERSION=vX.Y.Z, or none for a snapshot
	bash scripts/release.sh $(VERSION)

deps: ## the Go modules, tools and base images that have newer versions (the dependency-update routine)
	bash scripts/deps.sh
