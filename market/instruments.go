package market

import (
	"path/filepath"
	"sort"
	"strings"

	"github.com/dqnflow/dqnflow/data"
	"github.com/dqnflow/dqnflow/prices"
)

// Spec is one row of the instrument table: what an instrument is and what
// one fill of it costs a retail trader. The costs are per fill (a round
// trip pays them twice):
//
//	slippage   half the typical quoted spread, SlippageTicks ticks or
//	           SlippageBps basis points of the price: a market order at the
//	           open fills half a spread away from the mid
//	commission CommissionBps of the notional, plus CommissionPerContract
//	           money per contract at the contract's own PointValue (futures)
//
// Where the bars quote bid and ask (Bars.Spread), the bar's own half-spread
// replaces the slippage (Dataset.Slip); the commission stays.
type Spec struct {
	Symbol      string `json:"symbol"`
	Class       string `json:"class"` // ClassFX, ClassCrypto, ClassStock, ClassETF, ClassIndex, ClassFuture
	Description string `json:"description"`
	// TickSize is the smallest price step, in price units.
	TickSize float64 `json:"tick_size"`
	// PointValue is the money one price point of one contract is worth on
	// the venue the figures come from (100 000 for an FX standard lot, 1 for
	// a share or a coin, the exchange's multiplier for a future). It is for
	// reference and for CommissionPerContract: a run sizes its own contract
	// (Sizing) unless env.point_value fixes it.
	PointValue            float64 `json:"point_value"`
	SlippageTicks         float64 `json:"slippage_ticks,omitempty"`
	SlippageBps           float64 `json:"slippage_bps,omitempty"`
	CommissionBps         float64 `json:"commission_bps,omitempty"`
	CommissionPerContract float64 `json:"commission_per_contract,omitempty"`
}

// Asset classes of the instrument table.
const (
	ClassFX     = "fx"
	ClassCrypto = "crypto"
	ClassStock  = "stock"
	ClassETF    = "etf"
	ClassIndex  = "index"
	ClassFuture = "future"
)

// The cost figures of the table, by class. Each is a typical retail figure
// of 2023 for a liquid hour, not a quote of one broker; where a series spans
// decades (LEAN's equities from 1998), the figure is today's and older bars
// cost more than it says.
//
//   - FX (the 18 H4 pairs, LEAN's EURUSD and NZDUSD): a standard, spread-only
//     retail account (no commission), spreads in pips as brokers publish them
//     for the London/New York session: EURUSD 1.0, USDJPY 1.0, GBPUSD 1.2, AUDUSD
//     1.2, EURGBP 1.2, USDCHF 1.5, USDCAD 1.5, NZDUSD 1.5, EURJPY 1.5, EURCHF 1.8,
//     AUDCHF 2.0, EURAUD 2.0, EURCAD 2.2, GBPJPY 2.5, GBPCHF 2.5, GBPAUD 2.5,
//     EURNZD 3.0, GBPCAD 3.0. The tick is the pipette (0.00001, 0.001 for JPY
//     pairs), so the half-spread is 5 × pips ticks.
//   - Crypto (spot pairs against USD or USDT): a 10 bps taker fee per fill
//     (Binance's and Kraken's base retail tier, Coinbase Advanced's is higher),
//     and a half-spread of 1 bp for BTC and ETH, 2 bps for the large alts (ADA,
//     DOGE, LINK, LTC, MATIC, SOL, XRP) and 3 bps for the thinner ETC and UNI.
//   - US stocks and ETFs (the stock CFDs of the hourly set, LEAN's equities):
//     commission $0.005 a share (Interactive Brokers' fixed rate), about 0.5 bp
//     at $100, and a half-spread of 1 cent on a large cap's 1–2 cent spread:
//     0.5 bp for SPY, 1 bp for AAPL, IBM, NFLX and TSLA, 2 bps for AIG and BAC
//     (lower prices: a cent is more of the price), 3 bps for VXX.
//   - Index CFDs (Dow, Nasdaq-100, FTSE 100, S&P 500): spread-only, the
//     typical quoted spread in index points: Dow 2.0 (half 1.0 point ≈ 0.3 bp
//     at 34 000), Nasdaq-100 1.0 (half 0.5 ≈ 0.35 bp at 15 000), FTSE 100 1.0
//     (half 0.5 ≈ 0.7 bp at 7 500), S&P 500 0.5 (half 0.25 ≈ 0.6 bp at 4 400).
//   - Futures (the presets ES, NQ, CL, BRN, BTC): the exchange's tick and
//     multiplier and an all-in commission per side (broker, exchange and
//     clearing); slippage 1 tick (a market order crossing a one-tick book).
//     A preset named in env.instrument takes its slippage from
//     env.slippage_ticks as before the table existed.
var Instruments = []Spec{
	// FX, H4 (TheSnowGuru) and LEAN (OANDA, with bid/ask). Point value: a
	// standard lot, 100 000 units of the base currency.
	fx("AUDCHF", "Australian dollar / Swiss franc", 2.0),
	fx("AUDUSD", "Australian dollar / US dollar", 1.2),
	fx("EURAUD", "euro / Australian dollar", 2.0),
	fx("EURCAD", "euro / Canadian dollar", 2.2),
	fx("EURCHF", "euro / Swiss franc", 1.8),
	fx("EURGBP", "euro / pound sterling", 1.2),
	fx("EURJPY", "euro / Japanese yen", 1.5),
	fx("EURNZD", "euro / New Zealand dollar", 3.0),
	fx("EURUSD", "euro / US dollar", 1.0),
	fx("GBPAUD", "pound sterling / Australian dollar", 2.5),
	fx("GBPCAD", "pound sterling / Canadian dollar", 3.0),
	fx("GBPCHF", "pound sterling / Swiss franc", 2.5),
	fx("GBPJPY", "pound sterling / Japanese yen", 2.5),
	fx("GBPUSD", "pound sterling / US dollar", 1.2),
	fx("NZDUSD", "New Zealand dollar / US dollar", 1.5),
	fx("USDCAD", "US dollar / Canadian dollar", 1.5),
	fx("USDCHF", "US dollar / Swiss franc", 1.5),
	fx("USDJPY", "US dollar / Japanese yen", 1.0),

	// Crypto, hourly (TheSnowGuru). Ticks: the exchange's price step for
	// the pair's price range in 2023.
	crypto("ADAUSDT", "Cardano / Tether", 0.0001, 2),
	crypto("BTCUSD", "Bitcoin / US dollar", 0.1, 1),
	crypto("DOGEUSDT", "Dogecoin / Tether", 0.00001, 2),
	crypto("ETCUSDT", "Ethereum Classic / Tether", 0.01, 3),
	crypto("ETHUSD", "Ether / US dollar", 0.01, 1),
	crypto("ETHUSDT", "Ether / Tether", 0.01, 1),
	crypto("LINKUSDT", "Chainlink / Tether", 0.001, 2),
	crypto("LTCUSDT", "Litecoin / Tether", 0.01, 2),
	crypto("MATICUSDT", "Polygon / Tether", 0.0001, 2),
	crypto("SOLUSDT", "Solana / Tether", 0.01, 2),
	crypto("UNIUSDT", "Uniswap / Tether", 0.001, 3),
	crypto("XRPUSDT", "XRP / Tether", 0.0001, 2),

	// US stocks and ETFs: the stock CFDs of the hourly set and LEAN's
	// equities. A share is the contract (point value 1).
	stock("AAPLUSUSD", ClassStock, "Apple Inc. (CFD)", 1),
	stock("NFLXUSUSD", ClassStock, "Netflix Inc. (CFD)", 1),
	stock("TSLAUSUSD", ClassStock, "Tesla Inc. (CFD)", 1),
	stock("AAPL", ClassStock, "Apple Inc.", 1),
	stock("AIG", ClassStock, "American International Group", 2),
	stock("BAC", ClassStock, "Bank of America", 2),
	stock("IBM", ClassStock, "International Business Machines", 1),
	stock("SPY", ClassETF, "SPDR S&P 500 ETF", 0.5),
	stock("VXX", ClassETF, "iPath S&P 500 VIX short-term futures ETN", 3),

	// Index CFDs (TheSnowGuru hourly, and the bundled S&P 500): one unit
	// per index point, half-spread in points over a 1-point tick.
	{Symbol: "USA30IDXUSD", Class: ClassIndex, Description: "Dow Jones Industrial Average (CFD)", TickSize: 1, PointValue: 1, SlippageTicks: 1.0},
	{Symbol: "USATECHIDXUSD", Class: ClassIndex, Description: "Nasdaq-100 (CFD)", TickSize: 0.5, PointValue: 1, SlippageTicks: 1.0},
	{Symbol: "GBRIDXGBP", Class: ClassIndex, Description: "FTSE 100 (CFD)", TickSize: 0.5, PointValue: 1, SlippageTicks: 1.0},
	{Symbol: "USA500IDXUSD", Class: ClassIndex, Description: "S&P 500 (CFD)", TickSize: 0.25, PointValue: 1, SlippageTicks: 1.0},

	// Futures: the presets (Presets), CME/NYMEX/ICE ticks and multipliers,
	// all-in retail commissions per side.
	{Symbol: "ES", Class: ClassFuture, Description: "CME E-mini S&P 500", TickSize: 0.25, PointValue: 50, SlippageTicks: 1, CommissionPerContract: 2.50},
	{Symbol: "NQ", Class: ClassFuture, Description: "CME E-mini Nasdaq-100", TickSize: 0.25, PointValue: 20, SlippageTicks: 1, CommissionPerContract: 2.50},
	{Symbol: "CL", Class: ClassFuture, Description: "NYMEX WTI crude oil", TickSize: 0.01, PointValue: 1000, SlippageTicks: 1, CommissionPerContract: 2.50},
	{Symbol: "BRN", Class: ClassFuture, Description: "ICE Brent crude oil", TickSize: 0.01, PointValue: 1000, SlippageTicks: 1, CommissionPerContract: 2.50},
	{Symbol: "BTC", Class: ClassFuture, Description: "CME Bitcoin futures", TickSize: 5, PointValue: 5, SlippageTicks: 1, CommissionPerContract: 10.00},
}

// fx is an FX pair quoted spread-only at spreadPips (the table's FX note):
// tick one pipette, slippage half the spread in pipettes.
func fx(symbol, desc string, spreadPips float64) Spec {
	tick := 0.00001
	if strings.HasSuffix(symbol, "JPY") {
		tick = 0.001
	}
	return Spec{Symbol: symbol, Class: ClassFX, Description: desc, TickSize: tick, PointValue: 100000, SlippageTicks: 10 * spreadPips / 2}
}

// crypto is a spot pair with a 10 bps taker fee and halfSpreadBps.
func crypto(symbol, desc string, tick, halfSpreadBps float64) Spec {
	return Spec{Symbol: symbol, Class: ClassCrypto, Description: desc, TickSize: tick, PointValue: 1, SlippageBps: halfSpreadBps, CommissionBps: 10}
}

// stock is a US share or ETF: a cent tick, 0.5 bp commission and
// halfSpreadBps.
func stock(symbol, class, desc string, halfSpreadBps float64) Spec {
	return Spec{Symbol: symbol, Class: class, Description: desc, TickSize: 0.01, PointValue: 1, SlippageBps: halfSpreadBps, CommissionBps: 0.5}
}

// LookupInstrument returns the table's entry for symbol (any case).
func LookupInstrument(symbol string) (Spec, bool) {
	s := strings.ToUpper(strings.TrimSpace(symbol))
	for _, sp := range Instruments {
		if sp.Symbol == s {
			return sp, true
		}
	}
	return Spec{}, false
}

// InstrumentSymbols are the table's symbols, sorted.
func InstrumentSymbols() []string {
	out := make([]string, len(Instruments))
	for i, sp := range Instruments {
		out[i] = sp.Symbol
	}
	sort.Strings(out)
	return out
}

// SymbolOf is the instrument symbol a data path names by default, from its
// file name: the base name without "bundled:", without its extensions and
// without a LEAN prefix (equity-, forex-, crypto-, cfd-, future-), cut at
// its first underscore (a bar size or a year) and upper-cased:
//
//	hourly/BTCUSD_H1.csv       → BTCUSD
//	h4-forex/AUDCHF_H4.csv     → AUDCHF
//	lean/equity-spy.zip        → SPY
//	lean/forex-eurusd.zip      → EURUSD
//	bundled:USA500IDXUSD_H1.csv → USA500IDXUSD
//
// It is a default: a panel entry's "=SYMBOL" (data.series) overrides it,
// for a file whose name is not its symbol. "" for the synthetic series.
func SymbolOf(path string) string {
	if path == prices.SyntheticPath || path == "" {
		return ""
	}
	base := filepath.Base(strings.TrimPrefix(path, data.Prefix))
	for {
		ext := filepath.Ext(base)
		if ext == "" || ext == base {
			break
		}
		switch strings.ToLower(ext) {
		case ".csv", ".tsv", ".txt", ".zip", ".gz", ".parquet":
			base = strings.TrimSuffix(base, ext)
			continue
		}
		break
	}
	lower := strings.ToLower(base)
	for _, p := range []string{"equity-", "forex-", "crypto-", "cfd-", "future-"} {
		if strings.HasPrefix(lower, p) {
			base = base[len(p):]
			break
		}
	}
	if i := strings.IndexByte(base, '_'); i > 0 {
		base = base[:i]
	}
	return strings.ToUpper(base)
}
