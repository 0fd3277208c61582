package market_test

import (
	"bufio"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
)

// corpusFiles are the files of ../shared/data/corpus/MANIFEST.tsv (issue
// 45's corpus), listed here so that the table test needs no corpus.
var corpusFiles = []string{
	"hourly/AAPLUSUSD_H1.csv", "hourly/ADAUSDT_H1.csv", "hourly/BTCUSD_H1.csv", "hourly/DOGEUSDT_H1.csv",
	"hourly/ETCUSDT_H1.csv", "hourly/ETHUSDT_H1.csv", "hourly/ETHUSD_H1.csv", "hourly/GBRIDXGBP_H1.csv",
	"hourly/LINKUSDT_H1.csv", "hourly/LTCUSDT_H1.csv", "hourly/MATICUSDT_H1.csv", "hourly/NFLXUSUSD_H1.csv",
	"hourly/SOLUSDT_H1.csv", "hourly/TSLAUSUSD_H1.csv", "hourly/UNIUSDT_H1.csv", "hourly/USA30IDXUSD_H1.csv",
	"hourly/USATECHIDXUSD_H1.csv", "hourly/XRPUSDT_H1.csv",
	"h4-forex/AUDCHF_H4.csv", "h4-forex/AUDUSD_H4.csv", "h4-forex/EURAUD_H4.csv", "h4-forex/EURCAD_H4.csv",
	"h4-forex/EURCHF_H4.csv", "h4-forex/EURGBP_H4.csv", "h4-forex/EURJPY_H4.csv", "h4-forex/EURNZD_H4.csv",
	"h4-forex/EURUSD_H4.csv", "h4-forex/GBPAUD_H4.csv", "h4-forex/GBPCAD_H4.csv", "h4-forex/GBPCHF_H4.csv",
	"h4-forex/GBPJPY_H4.csv", "h4-forex/GBPUSD_H4.csv", "h4-forex/NZDUSD_H4.csv", "h4-forex/USDCAD_H4.csv",
	"h4-forex/USDCHF_H4.csv", "h4-forex/USDJPY_H4.csv",
	"lean/equity-aapl.zip", "lean/equity-aig.zip", "lean/equity-bac.zip", "lean/equity-ibm.zip",
	"lean/equity-spy.zip", "lean/equity-vxx.zip", "lean/forex-eurusd.zip", "lean/forex-nzdusd.zip",
}

// TestSymbolOfNamesTheInstrument: the documented examples, and the
// synthetic series has none.
func TestSymbolOfNamesTheInstrument(t *testing.T) {
	for path, want := range map[string]string{
		"hourly/BTCUSD_H1.csv":                      "BTCUSD",
		"../shared/data/corpus/lean/equity-spy.zip": "SPY",
		"lean/forex-eurusd.zip":                     "EURUSD",
		"h4-forex/AUDCHF_H4.csv":                    "AUDCHF",
		"bundled:USA500IDXUSD_H1.csv":               "USA500IDXUSD",
		"/data/prices.parquet":                      "PRICES",
		"eurusd.csv.gz":                             "EURUSD",
		prices.SyntheticPath:                        "",
	} {
		if got := market.SymbolOf(path); got != want {
			t.Errorf("SymbolOf(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestInstrumentTableCoversTheCorpus: every corpus file's symbol has a
// row with a usable tick and non-negative costs that are not all zero;
// config's list of symbols is the table's (config validates
// env.instrument with it); every preset is a future of the table.
func TestInstrumentTableCoversTheCorpus(t *testing.T) {
	files := corpusFiles
	if f, err := os.Open(filepath.Join("..", "..", "shared", "data", "corpus", "MANIFEST.tsv")); err == nil {
		// Where the corpus is present, its manifest is the list.
		files = nil
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if name, _, _ := strings.Cut(sc.Text(), "\t"); name != "file" && name != "" {
				files = append(files, name)
			}
		}
		f.Close()
	}
	for _, file := range files {
		sp, ok := market.LookupInstrument(market.SymbolOf(file))
		if !ok {
			t.Errorf("%s: symbol %q has no row in market.Instruments", file, market.SymbolOf(file))
			continue
		}
		if !(sp.TickSize > 0) || !(sp.PointValue > 0) || sp.SlippageTicks < 0 || sp.SlippageBps < 0 || sp.CommissionBps < 0 ||
			sp.SlippageTicks+sp.SlippageBps+sp.CommissionBps+sp.CommissionPerContract == 0 || sp.Class == "" || sp.Description == "" {
			t.Errorf("%s: row %+v: want a positive tick and point value, some cost, a class and a description", file, sp)
		}
	}
	var table []string
	for _, sp := range market.Instruments {
		if sp.Class != market.ClassFuture {
			table = append(table, sp.Symbol)
		} else if _, ok := market.Presets[sp.Symbol]; !ok {
			t.Errorf("future %s of the table is no preset", sp.Symbol)
		}
	}
	cfgSyms := append([]string(nil), config.InstrumentSymbols...)
	sort.Strings(table)
	sort.Strings(cfgSyms)
	if !reflect.DeepEqual(table, cfgSyms) {
		t.Errorf("table symbols %v, config.InstrumentSymbols %v: they must agree", table, cfgSyms)
	}
	if len(market.Presets) != len(config.InstrumentPresets) {
		t.Errorf("%d presets in market, %d in config", len(market.Presets), len(config.InstrumentPresets))
	}
	// An FX pair's slippage is half its spread: EURUSD's 1.0 pip is
	// 0.0001, half of it 0.00005.
	e := config.Defaults().Env
	e.Instrument = "EURUSD"
	in, err := market.ResolveInstrument(e, "lean/forex-eurusd.zip", 1.1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := in.SlippageTicks * in.TickSize; math.Abs(got-0.00005) > 1e-15 || in.Commission != 0 || in.CommissionBps != 0 {
		t.Errorf("EURUSD: slippage %g a fill (%+v), want half a pip 0.00005 and no commission", got, in)
	}
}

// TestInstrumentTableResolves: env.instrument "table" takes the file's row,
// a symbol names its row whatever the file, and an unknown one is an
// error naming env.instrument; "auto", presets and "bps" are as before.
func TestInstrumentTableResolves(t *testing.T) {
	e := config.Defaults().Env
	e.Instrument = config.InstrumentTable
	btc, err := market.ResolveInstrument(e, "../shared/data/corpus/hourly/BTCUSD_H1.csv", 30000, 1)
	if err != nil {
		t.Fatal(err)
	}
	if btc.Name != "BTCUSD" || btc.SlippageBps != 1 || btc.CommissionBps != 10 || btc.TickSize != 0.1 {
		t.Errorf("table on BTCUSD_H1.csv: %+v, want the BTCUSD row (1 bp slippage, 10 bps commission, tick 0.1)", btc)
	}
	// Round trip: 2·(1 + 10) bps of the price.
	if got := btc.RoundTripBps(30000); math.Abs(got-22) > 1e-9 {
		t.Errorf("BTCUSD round trip %g bps, want 22", got)
	}
	e.Instrument = "SPY"
	spy, err := market.ResolveInstrument(e, "prices.csv", 400, 1)
	if err != nil || spy.Name != "SPY" || spy.SlippageBps != 0.5 || spy.CommissionBps != 0.5 {
		t.Errorf("SPY on another file: %+v, %v; want the SPY row", spy, err)
	}
	e.Instrument = "ES"
	es, err := market.ResolveInstrument(e, "x.csv", 4000, 1)
	if err != nil || es.Commission != 2.5/50*es.PointValue || es.SlippageTicks != e.SlippageTicks || es.TickSize != 0.25 {
		t.Errorf("preset ES: %+v, %v; want tick 0.25, env's slippage and $2.50 at a $50 point", es, err)
	}
	e.Instrument = config.InstrumentTable
	_, err = market.ResolveInstrument(e, "mystery_H1.csv", 10, 1)
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Field != "env.instrument" || !strings.Contains(err.Error(), "MYSTERY") {
		t.Errorf("table on a file of no row: %v, want a FieldError for env.instrument naming the symbol MYSTERY", err)
	}
	cfg := config.Defaults()
	cfg.Env.Instrument = "EURUDS"
	if err := cfg.Validate(); !errors.As(err, &fe) || fe.Field != "env.instrument" {
		t.Errorf("Validate with env.instrument EURUDS: %v, want a FieldError for env.instrument", err)
	}
}

// TestSizingLeverage: notional is 1×; vol_target is target / σ of the
// estimation range's close-to-close returns, annualised, capped at
// MaxLeverage. Closes 100, 110, 99, 108.9 return +10 %, −10 %, +10 %:
// sample σ = √(((0.2/3)²·2 + (0.4/3)²)/2) = 0.11547 a bar; at 100 bars a
// year 1.1547, so 10 % asks for 0.0866×.
func TestSizingLeverage(t *testing.T) {
	b := &prices.Bars{Name: "hand", Close: []float64{100, 110, 99, 108.9, 108.9}}
	e := config.Defaults().Env
	if lev, err := market.Sizing(e, b, market.Range{From: 0, To: 4}, 100); err != nil || lev != 1 {
		t.Errorf("notional leverage %v, %v; want 1", lev, err)
	}
	e.Sizing, e.TargetVol = config.SizingVolTarget, 0.1
	sigma := math.Sqrt((2*math.Pow(0.2/3, 2) + math.Pow(0.4/3, 2)) / 2)
	lev, err := market.Sizing(e, b, market.Range{From: 0, To: 4}, 100)
	if want := 0.1 / (sigma * 10); err != nil || math.Abs(lev-want) > 1e-12 {
		t.Errorf("vol_target leverage %v, %v; want %v", lev, err, want)
	}
	// Only the estimation range counts: the flat bar 4 is outside it.
	if lev5, _ := market.Sizing(e, b, market.Range{From: 0, To: 5}, 100); lev5 == lev {
		t.Errorf("leverage %v over 5 bars equals the one over 4: the range is not what is read", lev5)
	}
	flat := &prices.Bars{Name: "flat", Close: []float64{5, 5, 5, 5}}
	if lev, err := market.Sizing(e, flat, market.Range{From: 0, To: 4}, 100); err != nil || lev != market.MaxLeverage {
		t.Errorf("leverage of a series that never moves %v, %v; want the cap %v", lev, err, market.MaxLeverage)
	}
	var fe *config.FieldError
	if _, err := market.Sizing(e, b, market.Range{From: 0, To: 2}, 100); !errors.As(err, &fe) || fe.Field != "env.sizing" {
		t.Errorf("vol_target on one return: %v, want a FieldError for env.sizing", err)
	}
	cfg := config.Defaults()
	cfg.Env.Sizing = "risk"
	if err := cfg.Validate(); !errors.As(err, &fe) || fe.Field != "env.sizing" {
		t.Errorf("Validate env.sizing risk: %v, want a FieldError for env.sizing", err)
	}
	cfg.Env.Sizing, cfg.Env.TargetVol = config.SizingVolTarget, -0.1
	if err := cfg.Validate(); !errors.As(err, &fe) || fe.Field != "env.target_vol" {
		t.Errorf("Validate env.target_vol −0.1: %v, want a FieldError for env.target_vol", err)
	}
	cfg.Env.TargetVol, cfg.Env.PointValue = 0.1, 50
	if err := cfg.Validate(); !errors.As(err, &fe) || fe.Field != "env.sizing" || !strings.Contains(err.Error(), "env.point_value") {
		t.Errorf("Validate vol_target with a fixed point value: %v, want a FieldError for env.sizing naming env.point_value", err)
	}
}

// TestLegacyCheckpointInstrumentIsTheSameContract: the instrument a
// checkpoint stored before sizing existed (ES at an auto point value: no
// sizing, leverage or commission points) reads as the one prepared now,
// so its run resumes; another point value does not.
func TestLegacyCheckpointInstrumentIsTheSameContract(t *testing.T) {
	e := config.Defaults().Env
	e.Instrument = "ES"
	now, err := market.ResolveInstrument(e, "bundled:USA500IDXUSD_H1.csv", 4000, 1)
	if err != nil {
		t.Fatal(err)
	}
	pv := e.InitialCapital / (float64(e.MaxContracts) * 4000)
	old := market.Instrument{Name: "ES", TickSize: 0.25, SlippageTicks: e.SlippageTicks, Commission: 2.5 / 50 * pv,
		PointValue: pv, MaxContracts: e.MaxContracts, InitialCapital: e.InitialCapital}
	if now.PointValue != pv || now.Commission != old.Commission {
		t.Fatalf("ES now: point value %v commission %v, before sizing %v %v: the numbers moved", now.PointValue, now.Commission, pv, old.Commission)
	}
	if !market.SameContract(old, now) || market.LegacySizing(old) != now {
		t.Errorf("the pre-sizing ES %+v is not the same contract as %+v", old, now)
	}
	other := old
	other.PointValue *= 2
	if market.SameContract(other, now) {
		t.Error("a stored point value twice the prepared one passed as the same contract")
	}
}
