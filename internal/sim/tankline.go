package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// TankLine is the plant's own line (see WritePlantExports) live: the same
// first-order-plus-dead-time tank, whose setpoints heater_sp and feed_sp
// can be written and read back and whose level is measured, advanced one
// sampling period at a time by Step on its own clock (tests inject it).
// Unlike the exports, the setpoints stay where they were written.
type TankLine struct {
	mu  sync.Mutex
	p   *plantRun
	now time.Time
	y   float64 // the last measured level
}

// Tank node ids.
const (
	TankHeater = "heater_sp"
	TankFeed   = "feed_sp"
	TankLevel  = "level"
)

// TankTruth is the tank's true process (what a step test should find):
// gains in cm per input unit, time constant and dead times in seconds.
type TankTruth struct {
	KHeater, KFeed         float64
	TauSec                 float64
	ThetaHeater, ThetaFeed float64
	NoiseSD                float64
}

// PlantTruth returns the plant's true parameters.
func PlantTruth() TankTruth {
	return TankTruth{KHeater: plantK1, KFeed: plantK2, TauSec: plantTauSec, ThetaHeater: plantTheta1, ThetaFeed: plantTheta2, NoiseSD: plantNoiseSD}
}

// NewTankLine starts a settled tank at heater 50 degC, feed 15 l/min,
// sampled every stepSec seconds from start.
func NewTankLine(seed uint64, stepSec int, start time.Time) *TankLine {
	p := newPlantRun(rand.New(rand.NewPCG(seed, 0x74616e6b)), stepSec, 0)
	p.u1, p.u2, p.hold = 50, 15, math.MaxInt
	l := &TankLine{p: p, now: start}
	l.y = p.y
	return l
}

// Now is the line's clock.
func (l *TankLine) Now() time.Time { l.mu.Lock(); defer l.mu.Unlock(); return l.now }

// Step advances one sampling period and returns the new time and the
// measured level.
func (l *TankLine) Step() (time.Time, float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _, y := l.p.step()
	l.now = l.now.Add(time.Duration(l.p.dt) * time.Second)
	l.y = y
	return l.now, y
}

// TrueLevel is the noise-free level at the last step (what the
// measurement would read without sensor noise).
func (l *TankLine) TrueLevel() float64 { l.mu.Lock(); defer l.mu.Unlock(); return l.p.y }

// Read reads a node: a setpoint reads back what was written, the level
// its last measurement.
func (l *TankLine) Read(_ context.Context, node string) (float64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch node {
	case TankHeater:
		return l.p.u1, nil
	case TankFeed:
		return l.p.u2, nil
	case TankLevel:
		return l.y, nil
	}
	return 0, fmt.Errorf("tank: no node %q", node)
}

// Write sets a setpoint (applied from the next step on).
func (l *TankLine) Write(_ context.Context, node string, v float64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("tank: %s = %v", node, v)
	}
	switch node {
	case TankHeater:
		l.p.u1 = v
	case TankFeed:
		l.p.u2 = v
	default:
		return fmt.Errorf("tank: %s is not writable", node)
	}
	return nil
}
