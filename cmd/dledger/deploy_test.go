package main

// Tests of scripts/k8s and scripts/docker: there is no cluster and no container engine here, so
// these check what can be checked without one. The manifests are parsed and their settings
// run through the server's own resolution; the init container's script runs for real; the
// Dockerfile's go build line is run as written.

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/dledger-go/dledger/dledger"
	"github.com/dledger-go/dledger/memberstate"
	"github.com/dledger-go/dledger/rpc/secure"
	"github.com/dledger-go/dledger/server/tlsfiles"
	"github.com/dledger-go/dledger/server/tlsfiles/tlstest"
)

const (
	k8sDir     = "../../scripts/k8s"
	dockerfile = "../../scripts/docker/Dockerfile"
	moduleRoot = "../.."
)

// The parts of the Kubernetes objects the checks read. A manifest is decoded from YAML into
// plain values and then through encoding/json, whose field matching ignores case, so
// "clusterIP" and "fsGroup" land in ClusterIP and FSGroup without tags.
type (
	k8sObject struct {
		APIVersion string
		Kind       string
		Metadata   k8sMeta
		Spec       json.RawMessage
		Data       map[string]string // Secret
		StringData map[string]string // Secret
	}
	k8sMeta struct {
		Name        string
		Labels      map[string]string
		Annotations map[string]string
	}
	k8sPort struct {
		Name          string
		ContainerPort int
		Port          int
		TargetPort    any
	}
	k8sEnv struct {
		Name      string
		Value     string
		ValueFrom *struct{ FieldRef *struct{ FieldPath string } }
	}
	k8sProbe struct {
		HTTPGet *struct {
			Path   string
			Port   any    // a port's name or number
			Scheme string // HTTP (the default) or HTTPS
		}
	}
	k8sSecurity struct {
		RunAsNonRoot             *bool
		RunAsUser, RunAsGroup    *int64
		FSGroup                  *int64
		ReadOnlyRootFilesystem   *bool
		AllowPrivilegeEscalation *bool
		Capabilities             *struct{ Drop []string }
	}
	k8sMount struct {
		Name      string
		MountPath string
		ReadOnly  bool
	}
	k8sContainer struct {
		Name                          string
		Command, Args                 []string
		Env                           []k8sEnv
		Ports                         []k8sPort
		ReadinessProbe, LivenessProbe *k8sProbe
		SecurityContext               k8sSecurity
		VolumeMounts                  []k8sMount
	}
	k8sVolume struct {
		Name   string
		Secret *struct {
			SecretName  string
			DefaultMode *int
			Items       []struct{ Key, Path string }
		}
		EmptyDir *struct{ Medium string }
	}
	k8sPodSpec struct {
		EnableServiceLinks            *bool
		TerminationGracePeriodSeconds *int64
		SecurityContext               k8sSecurity
		InitContainers, Containers    []k8sContainer
		Volumes                       []k8sVolume
	}
	k8sSelector    struct{ MatchLabels map[string]string }
	k8sStatefulSet struct {
		ServiceName         string
		Replicas            int
		PodManagementPolicy string
		Selector            k8sSelector
		Template            struct {
			Metadata k8sMeta
			Spec     k8sPodSpec
		}
		VolumeClaimTemplates []struct{ Metadata k8sMeta }
	}
	k8sService struct {
		ClusterIP                string
		PublishNotReadyAddresses bool
		Selector                 map[string]string
		Ports                    []k8sPort
	}
	k8sPDB struct {
		MaxUnavailable any
		Selector       k8sSelector
	}
)

// loadManifests reads every YAML document in scripts/k8s, by kind.
func loadManifests(t *testing.T) map[string][]k8sObject {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", k8sDir, err)
	}
	byKind := map[string][]k8sObject{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var doc any
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if doc == nil {
				continue
			}
			j, err := json.Marshal(doc)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			var o k8sObject
			if err := json.Unmarshal(j, &o); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Fatalf("%s: a document without apiVersion, kind or metadata.name", file)
			}
			byKind[o.Kind] = append(byKind[o.Kind], o)
		}
	}
	return byKind
}

func decodeSpec(t *testing.T, o k8sObject, into any) {
	t.Helper()
	if err := json.Unmarshal(o.Spec, into); err != nil {
		t.Fatalf("%s %s: spec: %v", o.Kind, o.Metadata.Name, err)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// selects: every label of the selector is on the pod.
func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// podEnv is a container's environment as the kubelet makes it for pod podName in namespace
// ns: the downward API's metadata.name and metadata.namespace, and $(VAR) expanded from the
// variables defined before it (a reference to anything else stays as it is, which would be a bug).
func podEnv(t *testing.T, c k8sContainer, podName, ns string) (map[string]string, []string) {
	t.Helper()
	vars := map[string]string{}
	var environ []string
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				v = podName
			case "metadata.namespace":
				v = ns
			default:
				t.Fatalf("env %s: field %s is not simulated here", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		case e.ValueFrom != nil:
			t.Fatalf("env %s: only fieldRef is simulated here", e.Name)
		default:
			v = envRef.ReplaceAllStringFunc(v, func(ref string) string {
				name := envRef.FindStringSubmatch(ref)[1]
				val, ok := vars[name]
				if !ok {
					t.Errorf("env %s refers to $(%s), which is not defined before it: Kubernetes would leave it as it is", e.Name, name)
				}
				return val
			})
		}
		if _, dup := vars[e.Name]; dup {
			t.Errorf("env %s is set twice", e.Name)
		}
		vars[e.Name] = v
		environ = append(environ, e.Name+"="+v)
	}
	return vars, environ
}

func portNumber(t *testing.T, c k8sContainer, port any) int {
	t.Helper()
	switch p := port.(type) {
	case float64:
		return int(p)
	case string:
		for _, cp := range c.Ports {
			if cp.Name == p {
				return cp.ContainerPort
			}
		}
	}
	t.Fatalf("port %v is not a port of container %s", port, c.Name)
	return 0
}

func addrPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	n, err2 := strconv.Atoi(p)
	if err != nil || err2 != nil {
		t.Fatalf("address %q: no port", addr)
	}
	return n
}

func mountOf(c k8sContainer, volume string) (k8sMount, bool) {
	for _, m := range c.VolumeMounts {
		if m.Name == volume {
			return m, true
		}
	}
	return k8sMount{}, false
}

// underMount: path is inside the mount (and not the mount itself), and its path below it.
func underMount(path string, m k8sMount) (string, bool) {
	rel, err := filepath.Rel(m.MountPath, path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return "", false
	}
	return rel, true
}

func TestKubernetesManifests(t *testing.T) {
	byKind := loadManifests(t)
	one := func(kind, apiVersion string) k8sObject {
		t.Helper()
		if len(byKind[kind]) != 1 {
			t.Fatalf("%d objects of kind %s, want 1", len(byKind[kind]), kind)
		}
		o := byKind[kind][0]
		if o.APIVersion != apiVersion {
			t.Fatalf("%s %s: apiVersion %s, want %s", kind, o.Metadata.Name, o.APIVersion, apiVersion)
		}
		return o
	}
	stsObj, svcObj := one("StatefulSet", "apps/v1"), one("Service", "v1")
	pdbObj, secretObj := one("PodDisruptionBudget", "policy/v1"), one("Secret", "v1")
	var sts k8sStatefulSet
	var svc k8sService
	var pdb k8sPDB
	decodeSpec(t, stsObj, &sts)
	decodeSpec(t, svcObj, &svc)
	decodeSpec(t, pdbObj, &pdb)
	pod := sts.Template.Spec
	labels := sts.Template.Metadata.Labels

	// The Service, the StatefulSet and the PDB are about the same pods.
	if sts.ServiceName != svcObj.Metadata.Name {
		t.Errorf("StatefulSet serviceName %q, but the Service is %q: the pods' DNS names would not exist", sts.ServiceName, svcObj.Metadata.Name)
	}
	if svc.ClusterIP != "None" || !svc.PublishNotReadyAddresses {
		t.Errorf("Service: clusterIP %q, publishNotReadyAddresses %v; want a headless Service (None) that publishes "+
			"not-ready pods (members must reach each other before any is Ready)", svc.ClusterIP, svc.PublishNotReadyAddresses)
	}
	for what, sel := range map[string]map[string]string{"StatefulSet selector": sts.Selector.MatchLabels,
		"Service selector": svc.Selector, "PodDisruptionBudget selector": pdb.Selector.MatchLabels} {
		if !selects(sel, labels) {
			t.Errorf("%s %v does not select the pods (labels %v)", what, sel, labels)
		}
	}
	if fmt.Sprint(pdb.MaxUnavailable) != "1" {
		t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1 (3 members keep a quorum of 2)", pdb.MaxUnavailable)
	}
	if sts.PodManagementPolicy != "Parallel" {
		t.Errorf("podManagementPolicy %q: with OrderedReady dledger-1 waits for dledger-0 to be Ready, "+
			"which needs a leader, which needs dledger-1", sts.PodManagementPolicy)
	}
	if sts.Replicas != 3 {
		t.Errorf("replicas %d, want 3", sts.Replicas)
	}

	// Non-root, read-only, no privileges, for every container.
	sc := pod.SecurityContext
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 ||
		sc.RunAsGroup == nil || sc.FSGroup == nil {
		t.Fatalf("pod securityContext %s: want runAsNonRoot, a non-zero runAsUser, runAsGroup and fsGroup", jsonText(sc))
	}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		s := c.SecurityContext
		if s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem || s.AllowPrivilegeEscalation == nil ||
			*s.AllowPrivilegeEscalation || s.Capabilities == nil || !slices.Contains(s.Capabilities.Drop, "ALL") ||
			(s.RunAsUser != nil && *s.RunAsUser == 0) {
			t.Errorf("container %s: securityContext %s; want readOnlyRootFilesystem, no privilege escalation, "+
				"capabilities dropped, not root", c.Name, jsonText(s))
		}
	}
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		t.Errorf("enableServiceLinks is not false: Kubernetes would add DLEDGER_SERVICE_HOST, DLEDGER_PORT, ... " +
			"for the Service, and the member would warn about each")
	}
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 1 {
		t.Fatalf("%d containers and %d init containers, want 1 and 1", len(pod.Containers), len(pod.InitContainers))
	}
	c, initC := pod.Containers[0], pod.InitContainers[0]

	// The settings as member 1 in namespace prod gets them.
	const ns = "prod"
	podName := stsObj.Metadata.Name + "-1"
	vars, environ := podEnv(t, c, podName, ns)

	// The Secret reaches --key-file and --admin-token-file through the init container, which
	// runs here for real.
	keyFile, tokenFile := vars["DLEDGER_KEY_FILE"], vars["DLEDGER_ADMIN_TOKEN_FILE"]
	certFile, certKeyFile := vars["DLEDGER_CERT_FILE"], vars["DLEDGER_CERT_KEY_FILE"]
	files := secretFiles(t, pod, initC, c, secretObj, secretPaths{keyFile, tokenFile, certFile, certKeyFile},
		uint32(*sc.RunAsUser), uint32(*sc.RunAsGroup), uint32(*sc.FSGroup))

	// The data dir is on the volume claim template.
	dataDir := vars["DLEDGER_DATA_DIR"]
	if len(sts.VolumeClaimTemplates) != 1 {
		t.Fatalf("%d volumeClaimTemplates, want 1 (the data dir)", len(sts.VolumeClaimTemplates))
	}
	dataMount, ok := mountOf(c, sts.VolumeClaimTemplates[0].Metadata.Name)
	if !ok || dataMount.ReadOnly {
		t.Fatalf("the volume claim %q is not mounted writable in %s", sts.VolumeClaimTemplates[0].Metadata.Name, c.Name)
	}
	dataRel, ok := underMount(dataDir, dataMount)
	if !ok {
		t.Fatalf("DLEDGER_DATA_DIR %q is not on the volume claim mounted at %s", dataDir, dataMount.MountPath)
	}

	// Resolve exactly these settings, with the files moved to where this test made them.
	local := filepath.Join(t.TempDir(), "pvc")
	for i, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "DLEDGER_KEY_FILE":
			environ[i] = name + "=" + files[keyFile]
		case "DLEDGER_ADMIN_TOKEN_FILE":
			environ[i] = name + "=" + files[tokenFile]
		case "DLEDGER_CERT_FILE":
			environ[i] = name + "=" + files[certFile]
		case "DLEDGER_CERT_KEY_FILE":
			environ[i] = name + "=" + files[certKeyFile]
		case "DLEDGER_DATA_DIR":
			environ[i] = name + "=" + filepath.Join(local, dataRel)
		}
	}
	var stderr bytes.Buffer
	su, code, ok := resolveServer(c.Args, environ, &stderr)
	if !ok {
		t.Fatalf("the StatefulSet's settings do not start a member (exit %d): %s", code, stderr.String())
	}
	if len(su.warnings) > 0 {
		t.Errorf("warnings: %q", su.warnings)
	}
	if su.cfg.SelfID != "n1" {
		t.Errorf("pod %s runs as member %q, want n1", podName, su.cfg.SelfID)
	}

	// The peers string names every replica by its DNS name in the headless Service, with the
	// id its pod name maps to, at the rpc port.
	port := func(name string) int {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
		t.Fatalf("container %s has no port named %s", c.Name, name)
		return 0
	}
	rpcPort, adminPort, metricsPort := port("rpc"), port("admin"), port("metrics")
	peers, err := memberstate.ParsePeers(su.cfg.Peers)
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) != sts.Replicas {
		t.Errorf("%d peers for %d replicas", len(peers), sts.Replicas)
	}
	for i, p := range peers {
		pn := fmt.Sprintf("%s-%d", stsObj.Metadata.Name, i)
		id, err := idFromPodName(pn)
		if err != nil || p.ID != id {
			t.Errorf("peer %d is %q, but pod %s runs as %q (%v)", i, p.ID, pn, id, err)
		}
		if want := fmt.Sprintf("%s.%s.%s.svc.cluster.local:%d", pn, sts.ServiceName, ns, rpcPort); p.Addr != want {
			t.Errorf("peer %s at %s, want %s", p.ID, p.Addr, want)
		}
	}
	// Each listener on its container port, and the Service exposes the same ports.
	if got := addrPort(t, su.cfg.Listen); got != rpcPort {
		t.Errorf("--listen %s, but the rpc container port is %d", su.cfg.Listen, rpcPort)
	}
	if got := addrPort(t, su.daemon.HTTPAddr); got != adminPort {
		t.Errorf("--http %s, but the admin container port is %d", su.daemon.HTTPAddr, adminPort)
	}
	if got := addrPort(t, su.daemon.MetricsAddr); got != metricsPort {
		t.Errorf("--metrics %s, but the metrics container port is %d", su.daemon.MetricsAddr, metricsPort)
	}
	if want := fmt.Sprintf("%s.%s.%s.svc.cluster.local:%d", podName, sts.ServiceName, ns, adminPort); su.daemon.AdminAdvertise != want {
		t.Errorf("--admin-advertise %q, want %q", su.daemon.AdminAdvertise, want)
	}
	if len(svc.Ports) != len(c.Ports) {
		t.Errorf("the Service has %d ports, the container %d", len(svc.Ports), len(c.Ports))
	}
	for _, sp := range svc.Ports {
		if target := portNumber(t, c, sp.TargetPort); target != sp.Port || target != port(sp.Name) {
			t.Errorf("Service port %s: %d -> %v, container port %d", sp.Name, sp.Port, sp.TargetPort, port(sp.Name))
		}
	}

	// The probes ask the metrics listener for routes it serves: readiness fails until the
	// member knows a leader (a new member is not ready), liveness passes as soon as it serves.
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil {
		t.Fatal("want an HTTP readiness and liveness probe")
	}
	for _, p := range []*k8sProbe{c.ReadinessProbe, c.LivenessProbe} {
		if got := portNumber(t, c, p.HTTPGet.Port); got != metricsPort {
			t.Errorf("probe %s on port %d, not the metrics listener's %d", p.HTTPGet.Path, got, metricsPort)
		}
		if tlsOn := su.daemon.TLS != nil; tlsOn != (p.HTTPGet.Scheme == "HTTPS") {
			t.Errorf("probe %s: scheme %q, but the metrics listener serves TLS: %v", p.HTTPGet.Path, p.HTTPGet.Scheme, tlsOn)
		}
	}
	if su.daemon.TLS == nil || su.daemon.InsecureNetworkTrusted {
		t.Errorf("the pods' listeners answer other pods: want them on TLS, not --insecure-network-trusted")
	}
	if got := sts.Template.Metadata.Annotations["prometheus.io/scheme"]; (su.daemon.TLS != nil) != (got == "https") {
		t.Errorf("prometheus.io/scheme %q, but the metrics listener serves TLS: %v", got, su.daemon.TLS != nil)
	}
	su.daemon.HTTPAddr, su.daemon.MetricsAddr = "127.0.0.1:0", "127.0.0.1:0"
	s, d := daemonMember(t, su.cfg, su.daemon)
	for _, p := range []struct {
		probe *k8sProbe
		code  int
	}{{c.ReadinessProbe, http.StatusServiceUnavailable}, {c.LivenessProbe, http.StatusOK}} {
		rec := httptest.NewRecorder()
		d.ReadOnlyHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p.probe.HTTPGet.Path, nil))
		if rec.Code != p.code {
			t.Errorf("GET %s on a member without a leader: %d, want %d", p.probe.HTTPGet.Path, rec.Code, p.code)
		}
	}

	// A leader hands over before it exits; Kubernetes must not kill it first.
	if grace, stop := pod.TerminationGracePeriodSeconds, s.StopTimeout(); grace == nil ||
		time.Duration(*grace)*time.Second <= stop {
		t.Errorf("terminationGracePeriodSeconds %v is not above the stop bound %v", grace, stop)
	}
	// The same bound with Java DLedger's timings, which an operator may switch to.
	if grace, stop := *pod.TerminationGracePeriodSeconds, dledgerProfileStopTimeout(t, su); time.Duration(grace)*time.Second <= stop {
		t.Errorf("terminationGracePeriodSeconds %d is not above the stop bound %v of --profile dledger", grace, stop)
	}
}

func dledgerProfileStopTimeout(t *testing.T, su serverSetup) time.Duration {
	cfg := su.cfg
	cfg.Profile, cfg.Election, cfg.DataDir = dledger.ProfileDLedger, dledger.Config{}, t.TempDir()
	su.daemon.HTTPAddr, su.daemon.MetricsAddr = "127.0.0.1:0", ""
	s, _ := daemonMember(t, cfg, su.daemon)
	return s.StopTimeout()
}

// secretPaths are where the member reads the files that come from the Secret.
type secretPaths struct{ key, token, cert, certKey string }

// secretFiles checks the path from the Secret to the member's key, token and TLS files and runs
// the init container's script, as the pod's user, on files as Kubernetes mounts them with
// fsGroup (mode 0440, group fsGroup). It returns where the files the member reads ended up here.
func secretFiles(t *testing.T, pod k8sPodSpec, initC, c k8sContainer, secret k8sObject, paths secretPaths,
	uid, gid, fsGroup uint32) map[string]string {
	t.Helper()
	var secretVol, copyVol k8sVolume
	for _, v := range pod.Volumes {
		switch {
		case v.Secret != nil:
			secretVol = v
		case v.EmptyDir != nil:
			copyVol = v
		}
	}
	if secretVol.Secret == nil || secretVol.Secret.SecretName != secret.Metadata.Name {
		t.Fatalf("no volume of the Secret %q", secret.Metadata.Name)
	}
	if m := secretVol.Secret.DefaultMode; m == nil || *m != 0o400 {
		t.Errorf("Secret volume defaultMode %v, want 0400", m)
	}
	if copyVol.EmptyDir == nil || copyVol.EmptyDir.Medium != "Memory" {
		t.Fatalf("no memory-backed emptyDir for the copies of the secret files")
	}
	// The example Secret has every item, and its placeholders do not pass for a key or token.
	dir := t.TempDir()
	for _, it := range secretVol.Secret.Items {
		v, ok := secret.StringData[it.Key]
		if !ok {
			t.Fatalf("the Secret has no %s", it.Key)
		}
		p := writeFile(t, dir, "placeholder-"+it.Key, v, 0o600)
		if _, err := secure.LoadKeyFile(p); err == nil && it.Key == "group.key" {
			t.Errorf("the example Secret's group.key is a usable key: everyone who reads this file would have it")
		}
		if _, err := readTokenFile(p); err == nil && it.Key == "admin.token" {
			t.Errorf("the example Secret's admin.token is a usable token")
		}
	}
	if _, err := tlsfiles.LoadKeyPair(filepath.Join(dir, "placeholder-tls.crt"), filepath.Join(dir, "placeholder-tls.key")); err == nil {
		t.Errorf("the example Secret's tls.crt and tls.key are a usable pair")
	}
	srcMount, ok1 := mountOf(initC, secretVol.Name)
	dstMount, ok2 := mountOf(initC, copyVol.Name)
	memberMount, ok3 := mountOf(c, copyVol.Name)
	if !ok1 || !ok2 || !ok3 || !memberMount.ReadOnly {
		t.Fatalf("want the Secret and the emptyDir mounted in the init container, and the emptyDir read-only in %s", c.Name)
	}
	if _, ok := mountOf(c, secretVol.Name); ok {
		t.Errorf("%s mounts the Secret itself (its files are group-readable, which the member refuses)", c.Name)
	}

	// Lay out the volumes as the kubelet would, under a directory the pod's user can enter.
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src, dst := filepath.Join(root, "secret"), filepath.Join(root, "emptydir")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dst, 0o777); err != nil {
		t.Fatal(err)
	}
	key, err := secure.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "real.key")
	if err := secure.WriteKeyFile(keyPath, key); err != nil {
		t.Fatal(err)
	}
	keyText, _ := os.ReadFile(keyPath)
	pair := tlstest.NewCA(t, "k8s").Server(t, "dledger")
	content := map[string]string{"group.key": string(keyText), "admin.token": "0123456789abcdef0123456789abcdef\n",
		"tls.crt": string(pair.CertPEM), "tls.key": string(pair.KeyPEM)}
	asUser := os.Geteuid() == 0
	for _, it := range secretVol.Secret.Items {
		p := filepath.Join(src, it.Path)
		if err := os.WriteFile(p, []byte(content[it.Key]), 0o440); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o440) // as fsGroup makes defaultMode 0400 (kubernetes/kubernetes#57923)
		if asUser {
			if err := os.Chown(p, 0, int(fsGroup)); err != nil {
				t.Fatal(err)
			}
		}
		if it.Key == "group.key" {
			if _, err := secure.LoadKeyFile(p); err == nil {
				t.Errorf("a group-readable key file loads: the init container would not be needed")
			}
		}
	}
	if asUser {
		if err := os.Chown(dst, 0, int(fsGroup)); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dst, 0o777|os.ModeSetgid)
	}
	cmd := slices.Clone(initC.Command)
	cmd = append(cmd, initC.Args...)
	if len(cmd) != 3 || cmd[0] != "/bin/sh" || cmd[1] != "-c" {
		t.Fatalf("init container command %q: want /bin/sh -c SCRIPT", cmd)
	}
	script := strings.ReplaceAll(strings.ReplaceAll(cmd[2], srcMount.MountPath, src), dstMount.MountPath, dst)
	for run := 1; run <= 2; run++ { // an init container runs again when the pod restarts
		sh := exec.Command("/bin/sh", "-c", script)
		if asUser && !runAs(sh, uid, gid, fsGroup) {
			t.Fatal("cannot run the script as the pod's user")
		}
		if out, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("init container script, run %d: %v\n%s", run, err, out)
		}
	}
	// What the member reads: the copies, 0400, its own.
	out := map[string]string{}
	for _, f := range []string{paths.key, paths.token, paths.cert, paths.certKey} {
		rel, ok := underMount(f, memberMount)
		if !ok {
			t.Fatalf("%s is not in the emptyDir the init container fills (mounted at %s)", f, memberMount.MountPath)
		}
		p := filepath.Join(dst, rel)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("the init container did not write %s: %v", f, err)
		}
		if fi.Mode().Perm() != 0o400 {
			t.Errorf("%s: mode %#o, want 0400", f, fi.Mode().Perm())
		}
		if st, ok := fileOwner(fi); asUser && ok && st != uid {
			t.Errorf("%s: owner %d, want the pod's user %d", f, st, uid)
		}
		out[f] = p
	}
	if _, err := secure.LoadKeyFile(out[paths.key]); err != nil {
		t.Errorf("the member's key file: %v", err)
	}
	if _, err := readTokenFile(out[paths.token]); err != nil {
		t.Errorf("the member's token file: %v", err)
	}
	if _, err := tlsfiles.LoadKeyPair(out[paths.cert], out[paths.certKey]); err != nil {
		t.Errorf("the member's certificate and key: %v", err)
	}
	return out
}

// dockerInstruction is one Dockerfile instruction, continuation lines joined.
type dockerInstruction struct {
	cmd, args string
	line      int
}

func readDockerfile(t *testing.T) []dockerInstruction {
	t.Helper()
	f, err := os.Open(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []dockerInstruction
	var cur strings.Builder
	start, n := 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, dockerInstruction{strings.ToUpper(cmd), strings.TrimSpace(args), start})
		cur.Reset()
	}
	return out
}

// shellWords splits a simple shell command line: words, with '...' and "..." quoting.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0 && ch == quote:
			quote = 0
		case quote != 0:
			w.WriteByte(ch)
		case ch == '\'' || ch == '"':
			quote, in = ch, true
		case ch == ' ' || ch == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		case strings.IndexByte("&|;<>$`\\", ch) >= 0:
			return nil, fmt.Errorf("%q: shell syntax this check does not simulate", s)
		default:
			w.WriteByte(ch)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%q: unbalanced quote", s)
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}

// The Dockerfile can not be built here (no container engine). What it relies on is checked:
// the files it copies exist, its go build line builds a static binary that runs, the image
// runs that binary as `dledger server`, as a non-root user, and exposes the ports the
// Kubernetes example uses.
func TestDockerfile(t *testing.T) {
	ins := readDockerfile(t)
	var froms, users, entry []string
	var exposed []int
	var buildLine, binDest string
	args := map[string]string{}
	for _, in := range ins {
		switch in.cmd {
		case "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			args[k] = v
		case "FROM":
			froms = append(froms, in.args)
		case "USER":
			users = append(users, in.args)
		case "EXPOSE":
			for _, p := range strings.Fields(in.args) {
				n, err := strconv.Atoi(p)
				if err != nil {
					t.Fatalf("line %d: EXPOSE %q", in.line, p)
				}
				exposed = append(exposed, n)
			}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(in.args), &entry); err != nil {
				t.Fatalf("line %d: ENTRYPOINT is not the exec form (a JSON array): %v", in.line, err)
			}
		case "COPY":
			w := strings.Fields(in.args)
			if strings.HasPrefix(w[0], "--from=") {
				binDest = w[len(w)-1]
				continue
			}
			for _, src := range w[:len(w)-1] {
				if _, err := os.Stat(filepath.Join(moduleRoot, src)); err != nil {
					t.Errorf("line %d: COPY %s: %v", in.line, src, err)
				}
			}
		case "RUN":
			if strings.Contains(in.args, "go build") {
				buildLine = in.args
			}
		}
	}
	// The build stage's Go is the one go.mod asks for.
	gomod, err := os.ReadFile(filepath.Join(moduleRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := "?"
	if m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod); m != nil {
		goVersion = string(m[1])
	}
	if len(froms) != 2 || !strings.HasPrefix(froms[0], "golang:${GO_VERSION}") || args["GO_VERSION"] != goVersion {
		t.Errorf("stages %q with GO_VERSION %q: want a golang build stage at go.mod's Go %s, then the runtime stage",
			froms, args["GO_VERSION"], goVersion)
	}
	if len(froms) == 2 && !strings.HasPrefix(froms[1], "gcr.io/distroless/static") && froms[1] != "scratch" {
		t.Errorf("runtime stage %q: want distroless/static or scratch (the binary is static)", froms[1])
	}
	// Non-root, numerically (runAsNonRoot can only verify a numeric user), the pods' user.
	var st k8sStatefulSet
	decodeSpec(t, loadManifests(t)["StatefulSet"][0], &st)
	uid, _, _ := strings.Cut(users[len(users)-1], ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 || int64(n) != *st.Template.Spec.SecurityContext.RunAsUser {
		t.Errorf("USER %q: want a numeric non-root user, the StatefulSet's runAsUser %d", users, *st.Template.Spec.SecurityContext.RunAsUser)
	}
	if len(entry) != 2 || entry[0] != binDest || entry[1] != "server" {
		t.Errorf("ENTRYPOINT %q: want [%q, \"server\"]", entry, binDest)
	}
	var ports []int
	for _, p := range st.Template.Spec.Containers[0].Ports {
		ports = append(ports, p.ContainerPort)
	}
	slices.Sort(ports)
	slices.Sort(exposed)
	if !slices.Equal(ports, exposed) {
		t.Errorf("EXPOSE %v, but the StatefulSet's container ports are %v", exposed, ports)
	}
	ignore, err := os.ReadFile(dockerfile + ".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(ignore), "\n") {
		l = strings.Trim(strings.TrimSpace(l), "/")
		if slices.Contains([]string{".git", "go.mod", "go.sum", "cmd", "*", "**"}, l) {
			t.Errorf("Dockerfile.dockerignore excludes %q, which the build needs", l)
		}
	}

	// The build line, as written, with the output moved here.
	if buildLine == "" {
		t.Fatal("no RUN ... go build")
	}
	words, err := shellWords(buildLine)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for len(words) > 0 && strings.Contains(words[0], "=") {
		env, words = append(env, words[0]), words[1:]
	}
	if !slices.Contains(env, "CGO_ENABLED=0") || !slices.Contains(words, "-trimpath") || len(words) < 2 || words[0] != "go" || words[1] != "build" {
		t.Fatalf("build line %q: want CGO_ENABLED=0 go build -trimpath ...", buildLine)
	}
	if testing.Short() {
		t.Skip("runs the Dockerfile's go build")
	}
	bin := filepath.Join(t.TempDir(), "dledger")
	i := slices.Index(words, "-o")
	if i < 0 || i+1 >= len(words) {
		t.Fatalf("build line %q has no -o", buildLine)
	}
	words[i+1] = bin
	build := exec.Command(words[0], words[1:]...)
	build.Dir = moduleRoot
	// As in the golang image: no GOFLAGS, so go build stamps the version and commit from .git
	// (this machine's go env may say -buildvcs=false).
	build.Env = append(os.Environ(), append(env, "GOFLAGS=-buildvcs=auto")...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", buildLine, err, out)
	}
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	libs, _ := ef.ImportedLibraries()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP || len(libs) > 0 {
			t.Fatalf("the binary is dynamically linked (libraries %q): it would not run on distroless/static", libs)
		}
	}
	raw, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if abs, err := filepath.Abs(moduleRoot); err == nil && bytes.Contains(raw, []byte(abs+"/")) {
		t.Errorf("the binary contains the build directory %s: -trimpath did not take", abs)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "dledger ") {
		t.Fatalf("dledger version: %v\n%s", err, out)
	}
	// The image's version comes from the stamping (there is no -ldflags -X): from a git work
	// tree, the commit is in the binary.
	if _, err := os.Stat(filepath.Join(moduleRoot, ".git")); err == nil && !regexp.MustCompile(`revision: [0-9a-f]{40}`).Match(out) {
		t.Errorf("built in a git work tree, but dledger version says:\n%s", out)
	}
	t.Logf("dledger version of the image's build line:\n%s", out)
}
