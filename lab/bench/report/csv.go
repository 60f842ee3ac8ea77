package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/svclab/svclab/lab/bench"
)

// CSVHeader is the first line of results.csv.
var CSVHeader = []string{"mode", "method", "backend", "services", "endpoints", "metric", "rep", "value", "unit"}

// WriteCSV writes the header and every row.
func WriteCSV(w io.Writer, rows []bench.Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	for _, r := range rows {
		rec := []string{r.Mode, r.Method, r.Backend, strconv.Itoa(r.Services), strconv.Itoa(r.Endpoints),
			r.Metric, strconv.Itoa(r.Rep), strconv.FormatFloat(r.Value, 'g', 9, 64), r.Unit}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadCSV reads what WriteCSV wrote, checking the header and every field.
func ReadCSV(rd io.Reader) ([]bench.Row, error) {
	cr := csv.NewReader(rd)
	cr.FieldsPerRecord = len(CSVHeader)
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	for i, h := range CSVHeader {
		if head[i] != h {
			return nil, fmt.Errorf("header column %d is %q, want %q", i+1, head[i], h)
		}
	}
	var rows []bench.Row
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, err
		}
		r := bench.Row{Mode: rec[0], Method: rec[1], Backend: rec[2], Metric: rec[5], Unit: rec[8]}
		ints := []struct {
			p    *int
			text string
		}{{&r.Services, rec[3]}, {&r.Endpoints, rec[4]}, {&r.Rep, rec[6]}}
		for _, f := range ints {
			if *f.p, err = strconv.Atoi(f.text); err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
		}
		if r.Value, err = strconv.ParseFloat(rec[7], 64); err != nil || math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
			return nil, fmt.Errorf("line %d: value %q is not a finite number", line, rec[7])
		}
		rows = append(rows, r)
	}
}

// writeCSVFile writes rows to path.
func writeCSVFile(path string, rows []bench.Row) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteCSV(f, rows); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
