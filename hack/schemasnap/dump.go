package main

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// entry is one object section of a pg_dump script: the "-- Name: …; Type: …" header and the
// statements below it.
type entry struct {
	name, kind string // "webhook_inbox webhook_inbox_pkey", "CONSTRAINT"
	body       string // statements, trimmed
}

var (
	header = regexp.MustCompile(`(?m)^--\n-- Name: (.*); Type: ([A-Z ]+); Schema: [^;]*; Owner: [^\n]*\n--\n`)
	// Lines whose text differs between runs or machines: pg_dump's random \restrict key and the
	// server and client versions.
	volatileLine = regexp.MustCompile(`(?m)^(\\restrict|\\unrestrict|-- Dumped from|-- Dumped by).*\n`)
	indexTable   = regexp.MustCompile(`\bON (?:ONLY )?public\.(\w+)`)
	alterTable   = regexp.MustCompile(`^ALTER TABLE (?:ONLY )?public\.(\w+)`)
	ownedBy      = regexp.MustCompile(`OWNED BY public\.(\w+)\.`)
)

// splitDump cuts a pg_dump --schema-only script into its object sections, dropping the
// preamble (SET commands) and the volatile lines.
func splitDump(dump string) ([]entry, error) {
	dump = volatileLine.ReplaceAllString(dump, "")
	locs := header.FindAllStringSubmatchIndex(dump, -1)
	if len(locs) == 0 {
		return nil, fmt.Errorf("no object sections in the dump")
	}
	entries := make([]entry, 0, len(locs))
	for i, loc := range locs {
		end := len(dump)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		body := dump[loc[1]:end]
		body, _, _ = strings.Cut(body, "--\n-- PostgreSQL database dump complete")
		entries = append(entries, entry{
			name: dump[loc[2]:loc[3]],
			kind: dump[loc[4]:loc[5]],
			body: strings.TrimSpace(body),
		})
	}
	return entries, nil
}

// object is everything the snapshot shows about one table or function: its sections in dump
// order (definition, constraints, indexes, comments, grants).
type object struct {
	file, name string
	entries    []entry
}

// functionEntities are the entities of the function naming pattern boardreadyops_<entity>_<verb>
// (migration 00014); each gets one file.
var functionEntities = []string{"execution_attempt", "release_run", "retention", "row_rule", "webhook", "outbox", "schema", "job", "audit", "clock"}

// aliasComment marks the old names that 00014 keeps as wrappers of the new ones.
var aliasComment = regexp.MustCompile(`IS '(Deprecated|Permanent) name of `)

// group routes each section to the table or function it belongs to, and the schema-wide ones
// (schema privileges, default privileges) to roles.sql.
func group(entries []entry) (map[string]*object, error) {
	objects := map[string]*object{}
	get := func(file, name string) *object {
		key := file + "\x00" + name
		o, ok := objects[key]
		if !ok {
			o = &object{file: file, name: name}
			objects[key] = o
		}
		return o
	}
	for _, e := range entries {
		file, name, err := route(e)
		if err != nil {
			return nil, err
		}
		o := get(file, name)
		o.entries = append(o.entries, e)
	}
	// Functions whose comment marks them as an old name of 00014 move to the aliases file.
	for key, o := range objects {
		if !strings.HasPrefix(o.file, "functions/") {
			continue
		}
		for _, e := range o.entries {
			if e.kind == "COMMENT" && aliasComment.MatchString(e.body) {
				delete(objects, key)
				o.file = "functions/aliases.sql"
				objects[o.file+"\x00"+o.name] = o
				break
			}
		}
	}
	return objects, nil
}

func route(e entry) (file, name string, err error) {
	table := func(t string) (string, string, error) { return "tables/" + t + ".sql", t, nil }
	switch e.kind {
	case "TABLE":
		return table(e.name)
	case "CONSTRAINT", "FK CONSTRAINT", "TRIGGER", "DEFAULT", "POLICY", "ROW SECURITY":
		t, _, _ := strings.Cut(e.name, " ")
		return table(t)
	case "INDEX":
		if m := indexTable.FindStringSubmatch(e.body); m != nil {
			return table(m[1])
		}
	case "SEQUENCE", "SEQUENCE OWNED BY":
		if m := alterTable.FindStringSubmatch(e.body); m != nil {
			return table(m[1])
		}
		if m := ownedBy.FindStringSubmatch(e.body); m != nil {
			return table(m[1])
		}
	case "FUNCTION":
		return functionFile(e.name), functionName(e.name), nil
	case "COMMENT", "ACL":
		what, rest, _ := strings.Cut(e.name, " ")
		switch what {
		case "FUNCTION":
			return functionFile(rest), functionName(rest), nil
		case "TABLE", "SEQUENCE":
			return table(rest)
		case "COLUMN":
			t, _, _ := strings.Cut(rest, ".")
			return table(t)
		case "SCHEMA":
			return "roles.sql", e.name, nil
		}
	case "DEFAULT ACL":
		return "roles.sql", e.name, nil
	}
	return "", "", fmt.Errorf("pg_dump section %q of type %s: no file for it in the snapshot", e.name, e.kind)
}

// functionName is the name of a function section "name(args)". pg_dump names a function's
// definition by its argument types and its comment and grants by its arguments with their
// names, so the name alone joins them (overloads, which the schema has none of, share an object).
func functionName(signature string) string {
	name, _, _ := strings.Cut(signature, "(")
	return name
}

// functionFile names the file of a function "name(args)" by the entity in its name.
func functionFile(signature string) string {
	rest, ok := strings.CutPrefix(functionName(signature), "boardreadyops_")
	if ok {
		for _, entity := range functionEntities {
			if strings.HasPrefix(rest, entity+"_") {
				return "functions/" + entity + ".sql"
			}
		}
	}
	return "functions/other.sql"
}

// render writes each file: its header, then its objects sorted by name, each object's sections
// in dump order.
func render(objects map[string]*object, fileHeader string) map[string]string {
	byFile := map[string][]*object{}
	for _, o := range objects {
		byFile[o.file] = append(byFile[o.file], o)
	}
	files := map[string]string{}
	for file, objs := range byFile {
		sort.Slice(objs, func(i, j int) bool { return objs[i].name < objs[j].name })
		for _, o := range objs {
			sort.SliceStable(o.entries, func(i, j int) bool { return kindRank(o.entries[i].kind) < kindRank(o.entries[j].kind) })
		}
		var b strings.Builder
		b.WriteString(fileHeader)
		for _, o := range objs {
			for _, e := range o.entries {
				fmt.Fprintf(&b, "\n-- %s %s\n%s\n", e.kind, e.name, e.body)
			}
		}
		files[file] = b.String()
	}
	return files
}

// sectionOrder is the order of an object's sections: its definition, then what refers to it.
var sectionOrder = []string{"TABLE", "FUNCTION", "SEQUENCE", "SEQUENCE OWNED BY", "DEFAULT", "CONSTRAINT",
	"FK CONSTRAINT", "INDEX", "TRIGGER", "ROW SECURITY", "POLICY", "COMMENT", "ACL", "DEFAULT ACL"}

func kindRank(kind string) int {
	for i, k := range sectionOrder {
		if k == kind {
			return i
		}
	}
	return len(sectionOrder)
}
