package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// WritePNG draws the result's plots side by side (a placeholder chart
// naming the result when it has none) and writes them as a PNG image.
func WritePNG(w io.Writer, r *Result) error {
	specs := r.Plots
	if len(specs) == 0 {
		specs = []Plot{{Title: r.Title}}
	}
	plots := make([]*plot.Plot, len(specs))
	for i := range specs {
		p, err := buildPlot(r, &specs[i])
		if err != nil {
			return err
		}
		plots[i] = p
	}
	const width, height = 6 * vg.Inch, 4.5 * vg.Inch
	img := vgimg.New(width*vg.Length(len(plots)), height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Centimeter,
		PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// buildPlot makes one chart: a line with points per series.
func buildPlot(r *Result, s *Plot) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = s.Title
	p.Legend.Top = true
	p.Legend.Left = true
	if s.Bars {
		return barPlot(r, s, p)
	}
	if s.X == "" || s.Y == "" {
		return p, nil
	}
	xi, yi := r.Column(s.X), r.Column(s.Y)
	if xi < 0 || yi < 0 {
		return nil, fmt.Errorf("bench: plot %q names unknown columns %q, %q", s.Title, s.X, s.Y)
	}
	p.X.Label.Text = r.Columns[xi].Header()
	p.Y.Label.Text = r.Columns[yi].Header()
	series, names, err := seriesPoints(r, s, xi, yi)
	if err != nil {
		return nil, err
	}
	if s.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if s.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	for i, name := range names {
		line, points, err := plotter.NewLinePoints(series[name])
		if err != nil {
			return nil, err
		}
		line.Color = plotutil.Color(i)
		line.Dashes = plotutil.Dashes(i)
		points.Color = plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		if name != "" {
			p.Legend.Add(name, line, points)
		}
	}
	return p, nil
}

// seriesPoints groups the matching rows' (x, y) points by series name,
// in order of first appearance. Rows with a missing value, or a value a
// log axis cannot show, are skipped.
func seriesPoints(r *Result, s *Plot, xi, yi int) (map[string]plotter.XYs, []string, error) {
	idx := make([]int, len(s.Series))
	for i, c := range s.Series {
		if idx[i] = r.Column(c); idx[i] < 0 {
			return nil, nil, fmt.Errorf("bench: plot %q names unknown series column %q", s.Title, c)
		}
	}
	keep, err := rowFilter(r, s)
	if err != nil {
		return nil, nil, err
	}
	series := map[string]plotter.XYs{}
	var names []string
	for _, row := range r.Rows {
		if !keep(row) {
			continue
		}
		x, okx := toFloat(row[xi])
		y, oky := toFloat(row[yi])
		if !okx || !oky || (s.LogX && x <= 0) || (s.LogY && y <= 0) {
			continue
		}
		parts := make([]string, len(idx))
		for i, c := range idx {
			parts[i] = fmt.Sprint(row[c])
		}
		name := strings.Join(parts, " ")
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		series[name] = append(series[name], plotter.XY{X: x, Y: y})
	}
	return series, names, nil
}

// barPlot draws one bar of s.Y per matching row, labelled by its Series
// values.
func barPlot(r *Result, s *Plot, p *plot.Plot) (*plot.Plot, error) {
	yi := r.Column(s.Y)
	if yi < 0 {
		return nil, fmt.Errorf("bench: plot %q names unknown column %q", s.Title, s.Y)
	}
	p.Y.Label.Text = r.Columns[yi].Header()
	keep, err := rowFilter(r, s)
	if err != nil {
		return nil, err
	}
	label := make([]int, len(s.Series))
	for i, c := range s.Series {
		if label[i] = r.Column(c); label[i] < 0 {
			return nil, fmt.Errorf("bench: plot %q names unknown label column %q", s.Title, c)
		}
	}
	var vals plotter.Values
	var labels []string
	for _, row := range r.Rows {
		y, ok := toFloat(row[yi])
		if !keep(row) || !ok {
			continue
		}
		parts := make([]string, len(label))
		for i, c := range label {
			parts[i] = fmt.Sprint(row[c])
		}
		vals = append(vals, y)
		labels = append(labels, strings.Join(parts, " "))
	}
	if len(vals) == 0 {
		return p, nil
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(14))
	if err != nil {
		return nil, err
	}
	bars.Color = plotutil.Color(0)
	p.Add(bars)
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = 0.9
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	return p, nil
}

// rowFilter returns whether a row passes s.Where.
func rowFilter(r *Result, s *Plot) (func(row []any) bool, error) {
	where := map[int]string{}
	for c, v := range s.Where {
		i := r.Column(c)
		if i < 0 {
			return nil, fmt.Errorf("bench: plot %q filters on unknown column %q", s.Title, c)
		}
		where[i] = v
	}
	return func(row []any) bool {
		for i, v := range where {
			if fmt.Sprint(row[i]) != v {
				return false
			}
		}
		return true
	}, nil
}
