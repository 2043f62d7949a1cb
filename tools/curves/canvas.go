package main

import (
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// canvas is a PNG holding plots side by side.
type canvas struct {
	c *vgimg.Canvas
	h vg.Length
}

func plotCanvas(w, h vg.Length) *canvas {
	return &canvas{c: vgimg.New(w, h), h: h}
}

// draw draws p in the w×h cell at x.
func (c *canvas) draw(p *plot.Plot, x, w, h vg.Length) {
	dc := draw.New(c.c)
	cell := draw.Crop(dc, x, x+w-dc.Max.X, 0, h-dc.Max.Y)
	p.Draw(cell)
}

func (c *canvas) save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: c.c}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
