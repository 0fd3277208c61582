package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/dqnflow/dqnflow/internal/suggest"
)

// knownKeys maps every key path of RunConfig ("optim.lr") to whether it is
// a section (an object of keys) rather than a value; built once from the
// json tags, so that it is never out of date.
var knownKeys = func() map[string]bool {
	keys := map[string]bool{}
	var add func(prefix string, t reflect.Type)
	add = func(prefix string, t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			path := prefix + name
			section := f.Type.Kind() == reflect.Struct
			keys[path] = section
			if section {
				add(path+".", f.Type)
			}
		}
	}
	add("", reflect.TypeFor[RunConfig]())
	return keys
}()

// keyAliases are the names other tools give to some keys, so that a key
// typed from habit ("learning_rate") is pointed at ours ("optim.lr").
var keyAliases = map[string]string{
	"learning_rate": "optim.lr",
	"discount":      "optim.gamma",
	"tau":           "optim.target_tau",
	"max_grad_norm": "optim.clip_norm",
	"grad_clip":     "optim.clip_norm",
	"n_epochs":      "epochs",
	"num_epochs":    "epochs",
	"buffer_size":   "replay.capacity",
	"memory_size":   "replay.capacity",
	"num_atoms":     "model.atoms",
	"n_atoms":       "model.atoms",
}

// unknownKey describes the first key of the JSON object raw that RunConfig
// does not have: its line and column, its full path and the nearest known
// key, e.g. `line 3 column 5: unknown key "optim.lerning_rate" (did you
// mean "optim.lr"?)`. Keys match as encoding/json matches them, ignoring
// case. ok is false when raw has no such key.
func unknownKey(raw []byte) (desc string, ok bool) {
	path, off, ok := firstUnknownKey(raw, 0, "")
	if !ok {
		return "", false
	}
	line, col := position(raw, off+1)
	desc = fmt.Sprintf("line %d column %d: unknown key %q", line, col, path)
	if near := nearestKey(path); near != "" {
		desc += fmt.Sprintf(" (did you mean %q?)", near)
	}
	return desc, true
}

// firstUnknownKey walks the object that starts at raw[base:] (a value of
// section prefix) and returns the path and byte offset of its first
// unknown key, in document order. Malformed JSON ends the walk with ok
// false: encoding/json reports it.
func firstUnknownKey(raw []byte, base int64, prefix string) (path string, off int64, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw[base:]))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", 0, false
	}
	for dec.More() {
		before := dec.InputOffset()
		t, err := dec.Token()
		key, isKey := t.(string)
		if err != nil || !isKey {
			return "", 0, false
		}
		// The key's opening quote: the first after the previous token
		// (past the comma and white space).
		at := base + before + int64(bytes.IndexByte(raw[base+before:], '"'))
		canonical, section, known := lookupKey(prefix + key)
		if !known {
			return prefix + key, at, true
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", 0, false
		}
		if section && len(v) > 0 && v[0] == '{' {
			start := base + dec.InputOffset() - int64(len(v))
			if p, o, ok := firstUnknownKey(raw, start, canonical+"."); ok {
				return p, o, true
			}
		}
	}
	return "", 0, false
}

// lookupKey reports whether path is a key of RunConfig, ignoring case as
// encoding/json does, spelt as RunConfig spells it ("Optim" → "optim"),
// and whether it is a section.
func lookupKey(path string) (canonical string, section, known bool) {
	if s, ok := knownKeys[path]; ok {
		return path, s, true
	}
	for k, s := range knownKeys {
		if strings.EqualFold(k, path) {
			return k, s, true
		}
	}
	return "", false, false
}

// nearestKey is the known key that path most likely meant: the one whose
// last element (or alias, keyAliases) is nearest by edit distance to
// path's last element, a key of path's own section winning a tie, so that
// "optim.lerning_rate" gives "optim.lr" and a key in the wrong section
// ("lr" at the top level) its right place. "" when none is near.
func nearestKey(path string) string {
	section, leaf := "", path
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		section, leaf = path[:i+1], path[i+1:]
	}
	type candidate struct{ name, key string }
	var own, other []candidate
	add := func(name, key string) {
		if strings.HasPrefix(key, section) && !strings.Contains(key[len(section):], ".") {
			own = append(own, candidate{name, key})
		} else {
			other = append(other, candidate{name, key})
		}
	}
	keys := make([]string, 0, len(knownKeys))
	for k := range knownKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		add(k[strings.LastIndexByte(k, '.')+1:], k)
	}
	aliases := make([]string, 0, len(keyAliases))
	for a := range keyAliases {
		aliases = append(aliases, a)
	}
	sort.Strings(aliases)
	for _, a := range aliases {
		add(a, keyAliases[a])
	}
	all := append(own, other...)
	names := make([]string, len(all))
	for i, c := range all {
		names[i] = c.name
	}
	if i := suggest.NearestIndex(leaf, names); i >= 0 {
		return all[i].key
	}
	return ""
}
