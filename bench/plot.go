package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotFile is a PNG written beside the report.
type plotFile struct{ name, file, alt string }

// palette colors the series of a plot, in order.
var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

// series is one set of bars: a value per row, NaN where there is none.
type series struct {
	name   string
	values []float64
}

// refLine is a vertical reference line across a bar plot.
type refLine struct {
	at   float64
	name string
}

// bars describes a horizontal grouped bar plot: one row per label, one bar
// per series in each row.
type bars struct {
	name, title, xLabel string
	labels              []string
	series              []series
	log                 bool    // log10 x axis
	logMin              float64 // with log: the axis's origin, 1 when zero; smaller values show no bar
	xMax                float64 // fixed upper bound; 0: from the data
	lines               []refLine
	format              func(float64) string // value labels
}

// writePlots draws the report's plots into dir.
func writePlots(res *Results, dir string) ([]plotFile, error) {
	var specs []bars
	floor := rtt(res)

	var u bars
	u.name, u.title, u.xLabel = "uncontended", "Uncontended Lock+Unlock latency (one goroutine, one key)", "µs"
	p50, p99 := series{name: "p50"}, series{name: "p99"}
	for _, r := range res.Uncontended {
		u.labels = append(u.labels, r.Label)
		p50.values = append(p50.values, usOrNaN(r.P50, r.Err == ""))
		p99.values = append(p99.values, usOrNaN(r.P99, r.Err == ""))
	}
	u.series = []series{p50, p99}
	u.format = func(f float64) string { return fmt.Sprintf("%.0f", f) }
	if floor > 0 {
		u.lines = append(u.lines, refLine{us(floor), "PING p50 (rueidis, pipelined)"}, refLine{targetNoPipeVsPing * us(floor), fmt.Sprintf("target, DisableAutoPipelining: %.1f× pipelined PING", targetNoPipeVsPing)})
	}
	if alone := uncontended(res, "relock-scripts"); alone != nil {
		u.lines = append(u.lines, refLine{targetP50VsScripts * us(alone.P50), fmt.Sprintf("target: %.2f× scripts alone", targetP50VsScripts)})
	}
	specs = append(specs, u)

	var d bars
	d.name, d.title, d.xLabel = "distinct", "64 goroutines on distinct keys", "Lock+Unlock per second"
	ops := series{name: "ops/s"}
	for _, r := range res.Distinct {
		d.labels = append(d.labels, r.Label)
		ops.values = append(ops.values, valueOrNaN(r.OpsPerSec, r.Ops > 0))
	}
	d.series = []series{ops}
	d.format = fmtRate
	specs = append(specs, d)

	holds := holdsOf(res)
	var labels []string
	for _, h := range res.HotKey {
		if !slices.Contains(labels, h.Label) {
			labels = append(labels, h.Label)
		}
	}
	hotSeries := func(value func(HotKeyRow) float64) []series {
		var ss []series
		for _, hold := range holds {
			s := series{name: "hold " + fmtHold(hold), values: make([]float64, len(labels))}
			for i := range s.values {
				s.values[i] = math.NaN()
			}
			for _, h := range res.HotKey {
				if h.Hold == hold && h.Err == "" {
					s.values[slices.Index(labels, h.Label)] = value(h)
				}
			}
			ss = append(ss, s)
		}
		return ss
	}
	h := bars{name: "handoffs", title: "One hot key, 32 waiters in 2 processes: handoffs per second", xLabel: "handoffs/s (log scale)", labels: labels, log: true, format: fmtRate,
		series: hotSeries(func(r HotKeyRow) float64 { return r.HandoffsSec })}
	if floor > 0 {
		h.lines = []refLine{{1 / (2 * floor.Seconds()), "ceiling 1/(2·RTT)"}}
	}
	specs = append(specs, h)
	specs = append(specs, bars{name: "fairness", title: "One hot key: Jain's fairness index over 32 waiters (1 = equal shares)", xLabel: "Jain's index", labels: labels, xMax: 1.35,
		series: hotSeries(func(r HotKeyRow) float64 { return r.Jain }), format: func(f float64) string { return fmt.Sprintf("%.2f", f) }})
	specs = append(specs, bars{name: "wait", title: "One hot key: wait p99 (first Lock call to acquisition)", xLabel: "ms (log scale)", labels: labels, log: true, logMin: 0.01,
		series: hotSeries(func(r HotKeyRow) float64 { return float64(r.WaitP99) / 1e6 }), format: fmtMs})

	var k bars
	k.name, k.title, k.xLabel = "watchdog", "Keeping leases alive: client CPU (3 s leases renewed every second)", "% of one core"
	idle, held := series{name: "idle"}, series{name: "leases held"}
	for _, r := range res.Watchdog {
		if !r.Renews || r.Acquired == 0 {
			continue
		}
		k.labels = append(k.labels, fmt.Sprintf("%s (%d leases)", r.Label, r.Acquired))
		idle.values = append(idle.values, 100*r.Idle.ClientCPU)
		held.values = append(held.values, 100*r.Held.ClientCPU)
	}
	k.series = []series{idle, held}
	k.format = func(f float64) string { return fmtPct(f / 100) }
	specs = append(specs, k)

	var files []plotFile
	for _, s := range specs {
		if len(s.labels) == 0 {
			continue
		}
		file := s.name + ".png"
		if err := s.draw(filepath.Join(dir, file)); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		files = append(files, plotFile{name: s.name, file: file, alt: s.title})
	}
	return files, nil
}

// draw renders b as a PNG at path. The first label is the top row.
func (b bars) draw(path string) error {
	p := plot.New()
	p.Add(plotter.NewGrid()) // first, so that it is under the bars
	p.Title.Text = b.title
	p.X.Label.Text = b.xLabel
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Points(4)
	p.Legend.YOffs = vg.Points(4)
	n := len(b.labels)
	height := max(vg.Points(22)*vg.Length(n)+vg.Points(90), vg.Points(200))
	rowHeight := (height - vg.Points(90)) / vg.Length(n) // about: the axes take the rest
	barWidth := rowHeight * 0.8 / vg.Length(len(b.series))

	logMin := b.logMin
	if logMin == 0 {
		logMin = 1
	}
	transform := func(v float64) float64 {
		if b.log {
			return math.Log10(math.Max(v, logMin) / logMin)
		}
		return v
	}
	// Rows are drawn bottom up: reverse so that the first label is on top.
	reversed := slices.Clone(b.labels)
	slices.Reverse(reversed)
	top := 0.0
	for i, s := range b.series {
		vals := make(plotter.Values, n)
		var marks plotter.XYLabels
		for row, v := range s.values {
			y := n - 1 - row
			text := "n/a"
			if !math.IsNaN(v) {
				vals[y] = transform(v)
				text = b.format(v)
			}
			top = math.Max(top, vals[y])
			offset := (float64(i) - float64(len(b.series)-1)/2) * float64(barWidth) / float64(rowHeight)
			marks.XYs = append(marks.XYs, plotter.XY{X: vals[y], Y: float64(y) - offset})
			marks.Labels = append(marks.Labels, text)
		}
		bc, err := plotter.NewBarChart(vals, barWidth)
		if err != nil {
			return err
		}
		bc.Horizontal = true
		bc.Color = palette[i%len(palette)]
		bc.LineStyle.Width = 0
		bc.Offset = -(vg.Length(i) - vg.Length(len(b.series)-1)/2) * barWidth
		p.Add(bc)
		if len(b.series) > 1 {
			p.Legend.Add(s.name, bc)
		}
		labels, err := plotter.NewLabels(marks)
		if err != nil {
			return err
		}
		for j := range labels.TextStyle {
			labels.TextStyle[j].Font.Size = vg.Points(7)
			labels.TextStyle[j].YAlign = draw.YCenter
		}
		labels.Offset = vg.Point{X: vg.Points(3)}
		p.Add(labels)
	}
	for i, l := range b.lines {
		x := transform(l.at)
		top = math.Max(top, x)
		line, err := plotter.NewLine(plotter.XYs{{X: x, Y: -0.5}, {X: x, Y: float64(n) - 0.5}})
		if err != nil {
			return err
		}
		line.Color = color.Gray{Y: 0x40}
		line.Width = vg.Points(1)
		line.Dashes = []vg.Length{vg.Points(4 + 2*float64(i)), vg.Points(3)}
		p.Add(line)
		p.Legend.Add(l.name, line)
	}
	p.NominalY(reversed...)
	// Leave the right of the plot free for the value labels and the legend.
	p.X.Min = 0
	p.X.Max = top * 1.5
	p.X.Tick.Marker = plainTicks{}
	if b.log {
		p.X.Max = top + 1.3
		p.X.Tick.Marker = logTicks{origin: logMin}
	}
	if b.xMax > 0 {
		p.X.Max = b.xMax
	}
	return p.Save(vg.Points(620), height, path)
}

// plainTicks are gonum's default ticks, labelled without trailing zeros.
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i, t := range ticks {
		if t.Label != "" {
			ticks[i].Label = strconv.FormatFloat(t.Value, 'g', 4, 64)
			if t.Value >= 1000 {
				ticks[i].Label = fmtRate(t.Value)
			}
		}
	}
	return ticks
}

// logTicks marks the powers of ten of a log10 axis whose 0 is origin.
type logTicks struct{ origin float64 }

func (t logTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(min); e <= math.Ceil(max); e++ {
		v := t.origin * math.Pow(10, e)
		label := fmtRate(v)
		if v < 1 {
			label = fmt.Sprintf("%g", v)
		}
		ticks = append(ticks, plot.Tick{Value: e, Label: label})
	}
	return ticks
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

func usOrNaN(d time.Duration, ok bool) float64 { return valueOrNaN(us(d), ok) }

func valueOrNaN(v float64, ok bool) float64 {
	if !ok {
		return math.NaN()
	}
	return v
}

// fmtMs renders milliseconds with three significant figures, without an
// exponent.
func fmtMs(f float64) string {
	if f >= 100 {
		return fmtRate(math.Round(f))
	}
	return strconv.FormatFloat(f, 'g', 3, 64)
}
