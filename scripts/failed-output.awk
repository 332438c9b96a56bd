# failed-output.awk: from `go test -v` output, print what each failed test itself printed.
#
#   awk -f scripts/failed-output.awk go-test.log
#
# With parallel tests (and t.Run from goroutines) the verbose log interleaves the tests' lines;
# go test names the test a line belongs to with a header ("=== RUN", "=== CONT", "=== NAME",
# "=== PAUSE") whenever it switches. The tail of the log is the wrong place to look for why a test
# failed: its t.Errorf may lie hundreds of lines before the end, among other tests' lines. This
# prints, per failed test (the "--- FAIL:" lines), every line written under its name, in order
# (a parent that printed nothing of its own is left out).

# First pass: the failed tests' names.
FNR == NR {
	if (match($0, /^[ \t]*--- FAIL: [^ ]+/)) {
		name = substr($0, RSTART, RLENGTH)
		sub(/^[ \t]*--- FAIL: /, "", name)
		failed[name] = 1
		order[++n] = name
	}
	next
}

# Second pass: each line goes to the test named by the last header; a package's end ("ok", "FAIL",
# "PASS") ends it.
/^=== (RUN|CONT|NAME|PAUSE) / { current = $3; next }
/^(ok|FAIL|PASS)([ \t]|$)/ { current = ""; next }
/^[ \t]*--- (PASS|FAIL|SKIP): / { next }
current in failed { lines[current] = lines[current] $0 "\n"; count[current]++ }

END {
	for (i = 1; i <= n; i++) {
		name = order[i]
		if (printed[name]++ || !count[name])
			continue
		printf "=== what %s printed (%d lines)\n%s", name, count[name] + 0, lines[name]
	}
}
