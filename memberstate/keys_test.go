package memberstate

import (
	"reflect"
	"strings"
	"testing"
)

const (
	key1 = "HJz+m53v07vcWqU4EwQgq/Rm5uthJUYRUYJK0N6iPw8="
	key2 = "McZeMpgUTF/kzeM4N4iDvEb1cTTO5EApJvmra6/uxw4="
)

// A configuration that carries member keys (issue 32) is written with a keys= field and read
// back as it was; one without keys is written exactly as before (six fields), so a group that
// never used them keeps the file older versions read.
func TestConfigKeysRoundTrip(t *testing.T) {
	o := Owner{Group: "g", SelfID: "n0"}
	d := testConfig()
	plain := string(encodeConfig(o, d))
	if strings.Contains(plain, "keys=") {
		t.Fatalf("a configuration without keys wrote a keys field:\n%s", plain)
	}
	d.Pending.Keys = []MemberKey{{ID: "n3", Key: key1}}
	b := encodeConfig(o, d)
	if !strings.Contains(string(b), " keys=n3-"+key1+"\n") {
		t.Fatalf("keys not written:\n%s", b)
	}
	got, err := decodeConfig(o, b)
	if err != nil || !reflect.DeepEqual(got, d) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, d)
	}
}

// CheckRecord refuses keys that are not one well-formed key per member, each its own.
func TestCheckRecordRefusesBadKeys(t *testing.T) {
	voters, _ := ParsePeers("n0-127.0.0.1:1;n1-127.0.0.1:2")
	for name, c := range map[string]struct {
		keys []MemberKey
		want string
	}{
		"not a member":    {[]MemberKey{{ID: "n9", Key: key1}}, `"n9" is not a member`},
		"two keys":        {[]MemberKey{{ID: "n1", Key: key1}, {ID: "n1", Key: key2}}, `"n1" has two keys`},
		"one key twice":   {[]MemberKey{{ID: "n0", Key: key1}, {ID: "n1", Key: key1}}, `is both "n0"'s and "n1"'s`},
		"malformed":       {[]MemberKey{{ID: "n1", Key: "not-a-key"}}, "not a base64-encoded 32-byte public key"},
		"short":           {[]MemberKey{{ID: "n1", Key: "AAAA"}}, "not a base64-encoded 32-byte public key"},
		"all zeros":       {[]MemberKey{{ID: "n1", Key: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}}, "all zeros"},
		"unpadded base64": {[]MemberKey{{ID: "n1", Key: strings.TrimSuffix(key1, "=")}}, "not a base64"},
	} {
		err := CheckRecord(ConfigRecord{Voters: voters, Keys: c.keys})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if err := CheckRecord(ConfigRecord{Voters: voters, Keys: []MemberKey{{ID: "n0", Key: key1}, {ID: "n1", Key: key2}}}); err != nil {
		t.Fatalf("good keys refused: %v", err)
	}
	if _, err := ParseMemberKeys("n1" + key1); err == nil {
		t.Fatal("an item without '-' parsed")
	}
}
