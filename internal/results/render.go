package results

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The markers around a generated table in a doc. The opening one names
// the records' file and, optionally, which record and which of its columns:
//
//	<!-- results FILE [series=NAME] [select=KEY:V1,V2,…] [columns=K1,K2,…] -->
//
// series keeps the records of that series; select keeps the records with a
// row for each of V1, V2, … in column KEY and shows only those rows, in
// that order; columns shows those columns, in that order (default: the
// record's own). Of the records kept, the newest is shown.
const (
	openMarker  = "<!-- results "
	closeMarker = "<!-- /results -->"
)

// marker is one parsed opening marker.
type marker struct {
	file, series string
	selectKey    string
	selectVals   []string
	columns      []string
	rowsNewest   bool
}

func parseMarker(line string) (marker, error) {
	body := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), openMarker), "-->")
	fields := strings.Fields(body)
	if len(fields) == 0 || strings.Contains(fields[0], "=") {
		return marker{}, fmt.Errorf("marker %q names no file", line)
	}
	m := marker{file: fields[0]}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || v == "" {
			return marker{}, fmt.Errorf("marker %q: %q is not key=value", line, f)
		}
		switch k {
		case "series":
			m.series = v
		case "select":
			key, vals, ok := strings.Cut(v, ":")
			if !ok || key == "" || vals == "" {
				return marker{}, fmt.Errorf("marker %q: select wants KEY:V1,V2,…, got %q", line, v)
			}
			m.selectKey, m.selectVals = key, strings.Split(vals, ",")
		case "columns":
			m.columns = strings.Split(v, ",")
		case "rows":
			if v != "newest" {
				return marker{}, fmt.Errorf("marker %q: rows wants newest, got %q", line, v)
			}
			m.rowsNewest = true
		default:
			return marker{}, fmt.Errorf("marker %q: unknown option %q (want series, select, columns or rows)", line, k)
		}
	}
	if m.rowsNewest && m.selectKey == "" {
		return marker{}, fmt.Errorf("marker %q: rows=newest needs select=KEY:V1,V2,…", line)
	}
	return m, nil
}

// keeps says whether r is a record the marker may show.
func (m marker) keeps(r Record) bool {
	if m.series != "" && r.Series != m.series {
		return false
	}
	for _, v := range m.selectVals {
		if !slices.ContainsFunc(r.Rows, func(row Row) bool { return cell(row[m.selectKey]) == v }) {
			return false
		}
	}
	return true
}

// Update returns doc with every table between markers rewritten from the
// newest record the marker asks for. records is ReadDir's answer; relDir
// is the records' directory as a link from the doc ("results").
func Update(doc []byte, records map[string][]Record, relDir string) ([]byte, error) {
	lines := strings.SplitAfter(string(doc), "\n")
	var out strings.Builder
	var errs []error
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		out.WriteString(line)
		if !strings.HasPrefix(strings.TrimSpace(line), openMarker) {
			continue
		}
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != closeMarker {
			if strings.HasPrefix(strings.TrimSpace(lines[end]), openMarker) {
				end = len(lines)
				break
			}
			end++
		}
		if end >= len(lines) {
			errs = append(errs, fmt.Errorf("line %d: %s has no %s before the next marker or the end", i+1, strings.TrimSpace(line), closeMarker))
			continue
		}
		block, err := generate(line, records, relDir)
		if err == nil {
			// An indented marker (inside a list item) indents its block.
			block = indent(block, line[:len(line)-len(strings.TrimLeft(line, " \t"))])
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", i+1, err))
			block = strings.Join(lines[i+1:end], "") // leave it as it was
		}
		out.WriteString(block)
		out.WriteString(lines[end])
		i = end
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return []byte(out.String()), nil
}

// generate is what belongs between the marker line and its close.
func generate(line string, records map[string][]Record, relDir string) (string, error) {
	m, err := parseMarker(line)
	if err != nil {
		return "", err
	}
	rs, ok := records[m.file]
	if !ok {
		return "", fmt.Errorf("no records file %s", m.file)
	}
	if m.rowsNewest {
		return generateEach(m, rs, relDir)
	}
	r, ok := Newest(rs, m.keeps)
	if !ok {
		return "", fmt.Errorf("no record in %s has series %q and rows %s %v", m.file, m.series, m.selectKey, m.selectVals)
	}
	rows := r.Rows
	if m.selectKey != "" {
		rows = nil
		for _, v := range m.selectVals {
			i := slices.IndexFunc(r.Rows, func(row Row) bool { return cell(row[m.selectKey]) == v })
			rows = append(rows, r.Rows[i])
		}
	}
	cols, err := m.columnsOf(r)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	writeTable(&b, cols, rows)
	b.WriteString("\n")
	b.WriteString(Provenance(r, path.Join(relDir, m.file)))
	b.WriteString("\n")
	if command := strings.TrimSpace(r.Command); strings.Contains(command, "\n") {
		b.WriteString("\n```sh\n" + command + "\n```\n")
	}
	return b.String(), nil
}

// generateEach is a table whose every row is the newest measurement of
// its own: for each selected value, the row of the newest record (of the
// series) that has it, with when, at which commit and by which command.
func generateEach(m marker, rs []Record, relDir string) (string, error) {
	var rows []Row
	var cols []Column
	for _, v := range m.selectVals {
		one := m
		one.selectVals = []string{v}
		r, ok := Newest(rs, one.keeps)
		if !ok {
			return "", fmt.Errorf("no record in %s has series %q and a row %s %s", m.file, m.series, m.selectKey, v)
		}
		if cols == nil {
			var err error
			if cols, err = m.columnsOf(r); err != nil {
				return "", err
			}
			cols = append(slices.Clone(cols), Column{Key: "\x00measured", Title: "measured"}, Column{Key: "\x00command", Title: "command", Code: true})
		}
		i := slices.IndexFunc(r.Rows, func(row Row) bool { return cell(row[m.selectKey]) == v })
		row := Row{"\x00measured": when(r), "\x00command": strings.Join(strings.Fields(r.Command), " ")}
		for k, x := range r.Rows[i] {
			row[k] = x
		}
		rows = append(rows, row)
	}
	var b bytes.Buffer
	writeTable(&b, cols, rows)
	history := path.Join(relDir, m.file)
	fmt.Fprintf(&b, "\nEach row is the newest record that has it; the machines, their load and the setups are in the history: [%s](%s).\n", history, history)
	return b.String(), nil
}

// when is a record's date and commit, as a table cell.
func when(r Record) string {
	d := r.Date
	if t, ok := r.Time(); ok && strings.Contains(r.Date, "T") {
		d = t.Format("2006-01-02 15:04") + " UTC"
	}
	if r.Commit == "" {
		return d
	}
	return d + " at " + r.Commit
}

// writeTable writes a Markdown table of rows under cols.
func writeTable(b *bytes.Buffer, cols []Column, rows []Row) {
	b.WriteString("|")
	for _, c := range cols {
		b.WriteString(" " + escape(c.Title) + " |")
	}
	b.WriteString("\n|")
	for range cols {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, row := range rows {
		b.WriteString("|")
		for _, c := range cols {
			v := cell(row[c.Key])
			if c.Code && v != "" {
				v = "`" + v + "`"
			}
			b.WriteString(" " + escape(v) + " |")
		}
		b.WriteString("\n")
	}
}

// Provenance is the paragraph under a table: when, which commit, which
// machine and how loaded, the command (inline when it is one line; a
// longer one follows in a block), the setup, and where the history is.
func Provenance(r Record, history string) string {
	var b strings.Builder
	b.WriteString("Measured ")
	if t, ok := r.Time(); ok && strings.Contains(r.Date, "T") {
		b.WriteString(t.Format("2006-01-02 15:04") + " UTC")
	} else {
		b.WriteString(r.Date)
	}
	if r.Commit != "" {
		b.WriteString(" at `" + r.Commit + "`")
	} else {
		b.WriteString(" (commit not recorded)")
	}
	fmt.Fprintf(&b, " on %d core%s", r.Machine.Cores, plural(r.Machine.Cores))
	var facts []string
	for _, f := range []string{r.Machine.CPU, r.Machine.OS} {
		if f != "" {
			facts = append(facts, f)
		}
	}
	switch len(r.Machine.Load) {
	case 1:
		facts = append(facts, "load average "+number(r.Machine.Load[0]))
	case 2:
		facts = append(facts, "load average "+number(r.Machine.Load[0])+"–"+number(r.Machine.Load[1]))
	}
	if r.Machine.Beside != "" {
		facts = append(facts, "beside it: "+r.Machine.Beside)
	}
	if len(facts) > 0 {
		b.WriteString(" (" + strings.Join(facts, "; ") + ")")
	}
	if command := strings.TrimSpace(r.Command); strings.Contains(command, "\n") {
		b.WriteString(" with the commands below.")
	} else {
		b.WriteString(" with `" + command + "`.")
	}
	if r.Setup != "" {
		b.WriteString(" " + strings.TrimSpace(r.Setup))
		if !strings.HasSuffix(b.String(), ".") {
			b.WriteString(".")
		}
	}
	fmt.Fprintf(&b, " History: [%s](%s).", history, history)
	return b.String()
}

// cell is a value as a table shows it.
func cell(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case bool:
		if v {
			return "yes"
		}
		return "no"
	case float64:
		return number(v)
	case int:
		return number(float64(v))
	default:
		return fmt.Sprint(v)
	}
}

// number writes a number as short as it is exact (0.47, 1333.2), with a
// comma every three digits of its whole part (1,691, 1,333.2).
func number(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if math.Abs(v) >= 1e15 || strings.ContainsAny(s, "eE") {
		return s
	}
	sign, whole, frac := "", s, ""
	if strings.HasPrefix(whole, "-") {
		sign, whole = "-", whole[1:]
	}
	if i := strings.IndexByte(whole, '.'); i >= 0 {
		whole, frac = whole[:i], whole[i:]
	}
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	return sign + whole + frac
}

// indent prefixes every non-empty line of block with prefix.
func indent(block, prefix string) string {
	if prefix == "" {
		return block
	}
	lines := strings.SplitAfter(block, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}

// escape keeps a value inside its table cell.
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// UpdateDocs rewrites the generated tables of every *.md in docsDir from
// the records in docsDir/results, writing only when write is set; it
// returns the docs whose tables were not what the records give.
func UpdateDocs(docsDir string, write bool) (stale []string, err error) {
	records, err := ReadDir(filepath.Join(docsDir, "results"))
	if err != nil {
		return nil, err
	}
	docs, err := filepath.Glob(filepath.Join(docsDir, "*.md"))
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var errs []error
	for _, p := range docs {
		old, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("results: %w", err)
		}
		updated, err := Update(old, records, "results")
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		if bytes.Equal(old, updated) {
			continue
		}
		stale = append(stale, p)
		if write {
			if err := os.WriteFile(p, updated, 0o644); err != nil {
				return stale, fmt.Errorf("results: %w", err)
			}
		}
	}
	return stale, errors.Join(errs...)
}

// columnsOf is the columns of r that m shows: all of them, or those m
// names, in its order.
func (m marker) columnsOf(r Record) ([]Column, error) {
	if m.columns == nil {
		return r.Columns, nil
	}
	var cols []Column
	for _, k := range m.columns {
		c, ok := r.column(k)
		if !ok {
			return nil, fmt.Errorf("the %s record of %s has no column %q", r.Date, m.file, k)
		}
		cols = append(cols, c)
	}
	return cols, nil
}
