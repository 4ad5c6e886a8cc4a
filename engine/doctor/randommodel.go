package doctor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"agentrl/engine/bench"
	"agentrl/engine/ledger"
	"agentrl/engine/model"
	"agentrl/engine/tokenizer"
	"agentrl/store/safetensors"
)

// RandomModel says what WriteRandomModel writes: a known shape (ledger.KnownShapes) or the shape
// of another folder's config.json (Like), random weights from Seed, the tokenizer files of
// Tokenizer (a folder holding tokenizer.json or tokenizer.json.gz and tokenizer_config.json, or
// one such file; default: Like's own), saved in DType (BF16 or F32).
type RandomModel struct {
	Shape, Like, Tokenizer, Out string
	DType                       safetensors.DType
	Seed                        uint64
}

// tokenizerFiles are the files of a tokenizer folder that a model folder carries.
var tokenizerFiles = []string{"tokenizer.json", "tokenizer.json.gz", "tokenizer_config.json"}

// WriteRandomModel writes a HuggingFace folder (config.json, model.safetensors, the tokenizer)
// with random weights, for the GPU self-check's recipe run: a model of a real shape without a
// download. Its config names the tokenizer's end tokens as end-of-sequence ids when it has none.
func WriteRandomModel(o RandomModel) error {
	if (o.Shape == "") == (o.Like == "") {
		return errors.New("random model: give exactly one of a shape name or a folder to copy the shape of")
	}
	if o.Out == "" {
		return errors.New("random model: give the folder to write")
	}
	var cfg *model.Config
	if o.Shape != "" {
		sh, err := ledger.KnownShape(o.Shape)
		if err != nil {
			return err
		}
		cfg = bench.ConfigFromShape(sh)
	} else {
		var err error
		if cfg, err = model.ReadConfig(o.Like); err != nil {
			return err
		}
		if o.Tokenizer == "" {
			o.Tokenizer = o.Like
		}
	}
	if o.Tokenizer == "" {
		return errors.New("random model: give a tokenizer folder or file (e.g. testdata/fixtures/qwen3-tokenizer)")
	}
	tok, err := tokenizer.Load(o.Tokenizer)
	if err != nil {
		return fmt.Errorf("random model: %w", err)
	}
	if tok.VocabSize() > cfg.VocabSize {
		return fmt.Errorf("random model: the tokenizer has %d tokens, more than the model's vocabulary of %d", tok.VocabSize(), cfg.VocabSize)
	}
	if len(cfg.EOSTokenIDs) == 0 {
		cfg.EOSTokenIDs = tok.ChatStopIDs()
	}
	if o.DType == "" {
		o.DType = safetensors.BF16
	}
	if err := model.RandomParamsParallel(cfg, max(o.Seed, 1), 0.02).Save(o.Out, o.DType); err != nil {
		return err
	}
	return copyTokenizer(o.Tokenizer, o.Out)
}

// copyTokenizer copies the tokenizer files of src (a folder, or a tokenizer file whose folder
// holds the rest) into dir.
func copyTokenizer(src, dir string) error {
	if st, err := os.Stat(src); err == nil && !st.IsDir() {
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(src)), data, 0o644); err != nil {
			return err
		}
		src = filepath.Dir(src)
	}
	for _, name := range tokenizerFiles {
		data, err := os.ReadFile(filepath.Join(src, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
