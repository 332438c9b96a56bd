package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"
)

// Principals. Each pkeys client is a principal of its own: the fabric's
// [ufm_pkeys] (ib-kubernetes) and each [ufm_pkeys:NAME] client (NICo, Slurm,
// the UFM SDK's tools), with its own credential, store view (its pkeys
// alone: store's principals.go), limits and slots. The clients served under
// one prefix of the API's listener share its routes, and the credential a
// request carries says whose they are: every client of the prefix is
// compared, in constant time, and the one it matches serves the request.
// networking-mlnx's [api] token matches no client (the configuration
// refuses a credential two principals share), so it opens no pkeys route,
// even where a token client's prefix is [api] prefix (UFM's token clients
// send /ufmRestV3); a pkeys credential opens no route of [api]'s. Where the
// two share a path (/jobs/:id under the same prefix), the path stays
// networking-mlnx's.

// SMConf is UFM's /app/smconf: the keys OpenSM runs the fabric with, as
// 0x-hex strings, and m_key_per_port as configured. NICo judges the fabric
// insecure when m_key is 0 or sm_key or sa_key is 1.
type SMConf struct {
	SubnetPrefix string `json:"subnet_prefix"`
	MKey         string `json:"m_key"`
	SMKey        string `json:"sm_key"`
	SAKey        string `json:"sa_key"`
	MKeyPerPort  bool   `json:"m_key_per_port"`
}

// smconf answers OpenSM's keys to a client whose section allows it, and 403
// to any other: they open every port's management and the SA's trusted
// requests.
func (pk *pkeysAPI) smconf(r *http.Request, _ httprouter.Params) (int, any, error) {
	if pk.o.SMConf == nil {
		return 0, nil, &httpError{http.StatusForbidden, fmt.Sprintf("%s may not read OpenSM's keys: "+
			"smconf = true in a [ufm_pkeys:NAME] section allows a client to", pk.o.section())}
	}
	ctx, cancel := pk.srv.dbCtx(r.Context())
	defer cancel()
	v, err := pk.o.SMConf(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("read OpenSM's keys: %w", err)
	}
	return http.StatusOK, v, nil
}

// unauthorized is the 401's message: which credential o's section wants.
func (o PKeysOptions) unauthorized() string {
	if o.Client == "" {
		return fmt.Sprintf("missing or wrong user name or password (HTTP Basic auth: %s username and password)", o.section())
	}
	return fmt.Sprintf("missing or wrong credential (%s: Authorization: Basic <token>, or HTTP Basic auth with its "+
		"username and password)", o.section())
}

// pkeysGroup is the pkeys clients served under one prefix of the API's
// listener, each with its own routes.
type pkeysGroup struct {
	srv     *Server
	prefix  string
	clients []*pkeysAPI
	routers []http.Handler // each client's routes, in clients' order
}

// pkeysGroups groups the served clients of list (not those on a listener of
// their own) by prefix, in list's order.
func pkeysGroups(s *Server, list []PKeysOptions) []*pkeysGroup {
	var out []*pkeysGroup
	byPrefix := map[string]*pkeysGroup{}
	for _, o := range list {
		if o.OwnListener || o.Store == nil {
			continue
		}
		g, ok := byPrefix[o.Prefix]
		if !ok {
			g = &pkeysGroup{srv: s, prefix: o.Prefix}
			byPrefix[o.Prefix] = g
			out = append(out, g)
		}
		pk := newPKeysAPI(s, o)
		r := s.newRouter()
		pk.routes(handleOn(r))
		g.clients, g.routers = append(g.clients, pk), append(g.routers, r)
	}
	return out
}

// routes registers the group's routes with handle, leaving out a path that
// taken says is another's already (networking-mlnx's jobs under its own
// prefix).
func (g *pkeysGroup) routes(handle func(method, path, route string, h httprouter.Handle), taken func(method, path string) bool) {
	g.clients[0].routes(func(method, path, route string, _ httprouter.Handle) {
		if !taken(method, path) {
			handle(method, path, route, g.serve)
		}
	})
}

// serve hands the request to the client whose credential it carries. Every
// client's is compared, whichever matched first: the time taken tells
// nothing of which did. A group of one client leaves the refusal to it, in
// its own words.
func (g *pkeysGroup) serve(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	creds := g.srv.creds.Load()
	var match http.Handler
	for i, pk := range g.clients {
		if creds.pkeysOK(r, pk.o.Principal()) && match == nil {
			match = g.routers[i]
		}
	}
	if match == nil && len(g.clients) == 1 {
		match = g.routers[0]
	}
	if match == nil {
		sections := make([]string, len(g.clients))
		for i, pk := range g.clients {
			sections[i] = pk.o.section()
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="ufm pkeys"`)
		writeError(w, http.StatusUnauthorized, fmt.Sprintf("missing or wrong credential for %s: the credential of "+
			"one of %s (Authorization: Basic <token>, or HTTP Basic auth)", g.prefix, strings.Join(sections, ", ")))
		return
	}
	match.ServeHTTP(w, r)
}

// servePKeys registers the routes of the pkeys clients on the API's
// listener, a prefix's once, with handle; taken says which paths [api]'s
// routes hold already.
func (s *Server) servePKeys(list []PKeysOptions, handle func(method, path, route string, h httprouter.Handle),
	taken func(method, path string) bool) {
	for _, g := range pkeysGroups(s, list) {
		g.routes(handle, taken)
	}
}
