package cli

import (
	"bufio"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"agentrl/envs/dataset"
)

// dapoParquetCommand writes a synthetic DAPO-Math-17k in verl's Parquet layout, the size of the
// real one by default: what a long data load is measured on without the download.
func dapoParquetCommand(env Env) *cobra.Command {
	var out string
	var problems, repeats, rowGroup int
	var seed uint64
	cmd := &cobra.Command{
		Use:   "dapo-parquet --out FILE [--problems 17917] [--repeats 100] [--row-group 131072]",
		Short: "write a synthetic DAPO-Math-17k in verl's Parquet layout (data_source, prompt, ability, reward_model, extra_info), each problem repeated",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("dev dapo-parquet: --out FILE is required (the Parquet file to write)")
			}
			f, err := os.Create(out)
			if err != nil {
				return err
			}
			w := bufio.NewWriterSize(f, 1<<20)
			t0, total := time.Now(), int64(problems)*int64(repeats)
			err = dataset.WriteSyntheticDAPO(w, problems, repeats, rowGroup, seed, func(n int64) {
				fmt.Fprintf(env.Stderr, "dev dapo-parquet: %d / %d rows\n", n, total)
			})
			if err == nil {
				err = w.Flush()
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				os.Remove(out)
				return fmt.Errorf("dev dapo-parquet: %s: %w", out, err)
			}
			fmt.Fprintf(env.Stderr, "wrote %s: %d problems × %d = %d rows in %.1fs\n", out, problems, repeats, total, time.Since(t0).Seconds())
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "the Parquet file to write")
	fl.IntVar(&problems, "problems", 17917, "distinct problems (DAPO-Math-17k has 17,917)")
	fl.IntVar(&repeats, "repeats", 100, "times the list of problems is repeated (verl's file: about 100, 1.79M rows)")
	fl.IntVar(&rowGroup, "row-group", 131072, "rows per Parquet row group")
	fl.Uint64Var(&seed, "seed", 1, "seed of the problems' numbers")
	return cmd
}
