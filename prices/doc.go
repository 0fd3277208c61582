// Package prices reads price files into bars and says what is in them.
//
// It owns:
//
//   - Bars, the OHLC(V) series every other package works on, with the
//     Origin of how it was read (bars.go);
//   - Source, where a process may read price files from (its data roots,
//     files.Roots) and what one read may cost (Limits), with the data paths
//     a run config names (DataPaths, ParseSeries for data.series) and the
//     check that runs make before they train (Source.Check);
//   - format detection from a file's first bytes, never its name
//     (Format; docs/adr/0035-corpus-formats.md), and one loader a format:
//     headered text (ParseCSV), headerless text (ParseHeaderless),
//     QuantConnect LEAN zips with their factor files (ParseLean,
//     ParseFactorFile) and Parquet (ParseParquet), all sharing one set of
//     checks on every bar, with errors (*ParseError) that name the file,
//     line, column and reason;
//   - Inspect, the summary of a series' gaps, jumps and spreads that
//     `dqnflow data inspect` prints.
//
// A loader returns every bar of a file or an error, never part of a file.
// Nothing here knows features, instruments or environments: package market
// turns Bars into a Dataset (market.Prepare, market.Load).
package prices
