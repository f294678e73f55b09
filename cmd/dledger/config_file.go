package main

// Where `dledger server` takes its settings from, highest first:
//
//	1. command-line flags
//	2. DLEDGER_* environment variables
//	3. the YAML file named by --config (or DLEDGER_CONFIG)
//	4. the timing profile (--profile), for the election timings
//
// Every setting is a flag. The environment and the file only fill in the flags the command line
// left unset, and they do it through the flag's own parser (flag.FlagSet.Set), so each layer
// accepts exactly the values the flag accepts, and a new flag is in every layer at once.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// commandLineOnly flags are not settings: --validate is a mode, and a file cannot name the
// file (DLEDGER_CONFIG can).
var commandLineOnly = map[string]bool{"validate": true}

// notInFile flags have an environment variable but no file key: a file does not name a file.
var notInFile = map[string]bool{"config": true}

// dledgerKeyAliases are the file keys of DLedger's DLedgerConfig and RocketMQ's broker config
// (dLeger*) that differ from a flag's own names.
var dledgerKeyAliases = map[string][]string{
	"group":                             {"dLegerGroup"},
	"id":                                {"selfId", "dLegerSelfId"},
	"peers":                             {"dLegerPeers"},
	"data-dir":                          {"dataStorePath"},
	"heartbeat-interval":                {"heartBeatTimeIntervalMs"},
	"max-heartbeat-leak":                {"maxHeartBeatLeak"},
	"min-vote-interval":                 {"minVoteIntervalMs"},
	"max-vote-interval":                 {"maxVoteIntervalMs"},
	"min-take-leadership-vote-interval": {"minTakeLeadershipVoteIntervalMs"},
	"max-take-leadership-vote-interval": {"maxTakeLeadershipVoteIntervalMs"},
	"preferred-leader-ids":              {"preferredLeaderId"},
}

// configsKey is DLedger's proxy list in a config file: the members of a host of many groups
// (`configs: [{group, selfId, peers, preferredLeaderIds}]`), read by server.ParseHostMembersIn.
const configsKey = "configs"

// listFlags take a YAML sequence as well as DLedger's ';'-separated string.
var listFlags = map[string]bool{"peers": true, "preferred-leader-ids": true}

// maxConfigFileSize bounds the file read. A settings file is a few hundred bytes, but a host's
// `configs:` list takes about 100 bytes a member: 10,000 members with preferred leaders made
// 1.1 MB, over the 1 MiB this bound was (found by `bench groups --groups 10000 --one-failover`).
// 64 MiB holds more than half a million members. A var only for the test of the bound.
var maxConfigFileSize int64 = 64 << 20

// envName is a flag's environment variable: DLEDGER_ and the flag's name in upper case with
// '-' as '_' (--heartbeat-interval: DLEDGER_HEARTBEAT_INTERVAL).
func envName(flagName string) string {
	return "DLEDGER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// camelToEnv is the variable a camelCase key would suggest: selfId: DLEDGER_SELF_ID.
func camelToEnv(key string) string {
	var b strings.Builder
	b.WriteString("DLEDGER_")
	for i, r := range key {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// camelName is a flag's name in camelCase, the style of DLedger's settings (data-dir: dataDir).
func camelName(flagName string) string {
	parts := strings.Split(flagName, "-")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// fileKeys maps every key a config file may use to its flag: the flag's name as written on the
// command line (data-dir, as etcd's files do), the same in camelCase (dataDir), and DLedger's
// and RocketMQ's names (dataStorePath).
func fileKeys(fs *flag.FlagSet) map[string]string {
	keys := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if commandLineOnly[f.Name] || notInFile[f.Name] {
			return
		}
		keys[f.Name] = f.Name
		keys[camelName(f.Name)] = f.Name
		for _, k := range dledgerKeyAliases[f.Name] {
			keys[k] = f.Name
		}
	})
	return keys
}

// fileValue is one setting read from a config file.
type fileValue struct {
	key   string
	line  int
	value string
	// root is, for configs:, the file's top-level mapping: hostMembers reads the host's
	// members from it rather than decoding the file again.
	root *yaml.Node
}

// settingOrigins says where each flag's value came from, for error messages: "--key-file",
// "DLEDGER_KEY_FILE", or "keyFile (/etc/dledger/n0.yaml:4)".
type settingOrigins map[string]string

func (o settingOrigins) of(flagName string) string {
	if s, ok := o[flagName]; ok {
		return s
	}
	return "--" + flagName
}

// applyConfigLayers fills every flag the command line left unset from the environment, then
// from the config file (--config, else DLEDGER_CONFIG). environ is os.Environ's form. It
// returns where each value came from and warnings: DLEDGER_ variables that name no setting are
// reported, not refused, because a container platform may set some (Kubernetes gives every pod
// DLEDGER_SERVICE_HOST, DLEDGER_PORT, ... for a Service named dledger).
//
// configsRoot is the file's top-level mapping when it has a configs: list (a host's members,
// which hostMembers reads from it), else nil.
func applyConfigLayers(fs *flag.FlagSet, environ []string) (origins settingOrigins, warnings []string, configsRoot *yaml.Node, err error) {
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	origins = settingOrigins{}
	envVars, warnings := configEnv(fs, environ)

	path := ""
	if onCommandLine["config"] {
		path = fs.Lookup("config").Value.String()
	} else if p, ok := envVars["config"]; ok {
		path = p
		origins["config"] = envName("config")
		fs.Set("config", p) // the host's members are read from it too (configs:)
	}
	var fromFile map[string]fileValue
	if path != "" {
		if fromFile, err = readConfigFile(path, fileKeys(fs)); err != nil {
			return nil, nil, nil, err
		}
		if fv, ok := fromFile[configsKey]; ok { // a host's members: resolveServer reads them
			origins[configsKey] = fmt.Sprintf("configs: (%s:%d)", path, fv.line)
			configsRoot = fv.root
		}
	}

	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || onCommandLine[f.Name] || commandLineOnly[f.Name] || notInFile[f.Name] {
			return
		}
		err = setFromLayers(fs, f.Name, envVars, fromFile, path, origins)
	})
	return origins, warnings, configsRoot, err
}

// configEnv is the settings environ's DLEDGER_ variables give (flag -> value; an empty
// variable is unset), and a warning for each DLEDGER_ variable that names no setting.
func configEnv(fs *flag.FlagSet, environ []string) (map[string]string, []string) {
	envVars := map[string]string{} // flag -> value
	known := map[string]string{}   // variable -> flag
	var knownNames []string
	// DLEDGER_SELF_ID is what DLedger's selfId would give: point at DLEDGER_ID.
	dledgerStyle := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if !commandLineOnly[f.Name] {
			known[envName(f.Name)] = f.Name
			knownNames = append(knownNames, envName(f.Name))
			for _, alias := range dledgerKeyAliases[f.Name] {
				dledgerStyle[camelToEnv(alias)] = envName(f.Name)
			}
		}
	})
	var warnings []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "DLEDGER_") {
			continue
		}
		f, ok := known[name]
		if !ok {
			hint := didYouMean(name, knownNames)
			if v, ok := dledgerStyle[name]; ok {
				hint = fmt.Sprintf(" (did you mean %s?)", v)
			}
			warnings = append(warnings, fmt.Sprintf("environment variable %s is not a setting, ignored%s", name, hint))
			continue
		}
		if value != "" { // an empty variable is unset, as an EnvironmentFile line "X=" means
			envVars[f] = value
		}
	}
	return envVars, warnings
}

// setFromLayers sets flag name, which the command line left unset, from the environment or
// else from the config file at path, and notes where its value came from.
func setFromLayers(fs *flag.FlagSet, name string, envVars map[string]string, fromFile map[string]fileValue, path string, origins settingOrigins) error {
	if v, ok := envVars[name]; ok {
		origins[name] = envName(name)
		if e := fs.Set(name, v); e != nil {
			return fmt.Errorf("%s=%q: %v", envName(name), v, e)
		}
		return nil
	}
	if fv, ok := fromFile[name]; ok {
		origins[name] = fmt.Sprintf("%s (%s:%d)", fv.key, path, fv.line)
		if e := fs.Set(name, fv.value); e != nil {
			return fmt.Errorf("%s:%d: %s: %v", path, fv.line, fv.key, e)
		}
	}
	return nil
}

// readConfigFile reads a YAML mapping of settings, keyed by flag. Unknown keys, a setting given
// twice (under two names, say) and values that are not a scalar (or, for peers and preferred
// leaders, a list of scalars) are errors naming the file and line. An empty file sets nothing.
func readConfigFile(path string, keys map[string]string) (map[string]fileValue, error) {
	b, err := readConfigBytes(path)
	if err != nil {
		return nil, err
	}
	root, err := configRoot(path, b)
	if root == nil || err != nil {
		return nil, err
	}
	var names []string
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	out := map[string]fileValue{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if err := addConfigSetting(out, path, root.Content[i], root.Content[i+1], keys, names); err != nil {
			return nil, err
		}
	}
	if fv, ok := out[configsKey]; ok {
		fv.root = root
		out[configsKey] = fv
	}
	return out, nil
}

// openConfigFile opens the config file (a test's seam: the file is read once).
var openConfigFile = os.Open

// readConfigBytes is the config file at path, refused when larger than maxConfigFileSize.
func readConfigBytes(path string) ([]byte, error) {
	f, err := openConfigFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if int64(len(b)) > maxConfigFileSize {
		return nil, fmt.Errorf("config file %s is larger than %d bytes", path, maxConfigFileSize)
	}
	return b, nil
}

// configRoot is the mapping of settings that b, the file at path, holds: one YAML document,
// nil when it is empty or only comments.
func configRoot(path string, b []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("config file %s: %v", path, err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config file %s: more than one YAML document (or %v)", path, err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" { // only comments
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: want settings as \"key: value\" lines", path, root.Line)
	}
	return root, nil
}

// addConfigSetting adds the setting of key k and value v (of the file at path) to out: keys maps
// every key a file may use to its flag, names are those keys sorted (for suggestions).
func addConfigSetting(out map[string]fileValue, path string, k, v *yaml.Node, keys map[string]string, names []string) error {
	if k.Value == configsKey { // DLedger's proxy list: a host's members (server.ParseHostMembersNode)
		out[configsKey] = fileValue{key: k.Value, line: k.Line}
		return nil
	}
	name, ok := keys[k.Value]
	if !ok {
		return fmt.Errorf("%s:%d: unknown setting %q%s", path, k.Line, k.Value, didYouMean(k.Value, names))
	}
	if prev, dup := out[name]; dup {
		return fmt.Errorf("%s:%d: %s sets what %s on line %d already set (--%s)", path, k.Line, k.Value, prev.key, prev.line, name)
	}
	value, err := scalarValue(v, listFlags[name])
	if err != nil {
		return fmt.Errorf("%s:%d: %s: %v", path, v.Line, k.Value, err)
	}
	out[name] = fileValue{key: k.Value, line: k.Line, value: value}
	return nil
}

// scalarValue is a value's text as the flag parses it; a list is joined with ';'.
func scalarValue(v *yaml.Node, list bool) (string, error) {
	if v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	switch {
	case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
		return "", errors.New("no value")
	case v.Kind == yaml.ScalarNode:
		return v.Value, nil
	case v.Kind == yaml.SequenceNode && list:
		var items []string
		for _, it := range v.Content {
			if it.Kind == yaml.AliasNode {
				it = it.Alias
			}
			if it.Kind != yaml.ScalarNode || it.Tag == "!!null" {
				return "", fmt.Errorf("line %d: want a list of strings", it.Line)
			}
			items = append(items, it.Value)
		}
		return strings.Join(items, ";"), nil
	case list:
		return "", errors.New("want a string (\"a;b\") or a list of strings")
	}
	return "", errors.New("want a single value, not a list or a mapping")
}

// didYouMean suggests the known name nearest to s, if it is near: a cheap guard against the
// typo that would otherwise become a silently ignored setting.
func didYouMean(s string, known []string) string {
	best, bestD := "", 1<<30
	for _, k := range known {
		if d := editDistance(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" || bestD > max(2, len(s)/4) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// editDistance is the Levenshtein distance between a and b, ignoring case.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if unicode.ToLower(ra[i-1]) == unicode.ToLower(rb[j-1]) {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
