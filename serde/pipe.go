package serde

import "context"

// Pipe returns a deserializer that runs stages in the listed order, each on
// the output of the previous one, then codec on the result. It is KIP-873's
// PipeDeserializer:
//
//	serde.Pipe(serde.JSON[Order](), serde.AESGCM(keys), serde.Gzip())
//
// decrypts, then decompresses, then decodes JSON.
//
// Every error is returned as an [*Error] naming the stage that failed (the
// codec's Name() if it has one, else "codec"); an error that already is one
// is returned as is. A panic in a stage or in codec is recovered and
// returned as a permanent [*PanicError].
func Pipe[T any](codec Deserializer[T], stages ...Stage) Deserializer[T] {
	p := &pipe[T]{codec: codec, codecName: nameOf(codec, "codec")}
	p.stages = append(p.stages, stages...)
	p.names = make([]string, len(stages))
	for i, s := range stages {
		p.names[i] = s.Name()
	}
	return p
}

type pipe[T any] struct {
	stages    []Stage
	names     []string
	codec     Deserializer[T]
	codecName string
}

func (p *pipe[T]) Name() string { return p.codecName }

func (p *pipe[T]) Deserialize(ctx context.Context, m Meta, data []byte) (v T, err error) {
	cur := -1 // index of the running stage; len(stages) is the codec
	defer func() {
		if r := recover(); r != nil {
			var zero T
			v, err = zero, newPanicError(p.stageName(cur), m.Part, r)
		}
	}()
	for i, s := range p.stages {
		cur = i
		data, err = s.Decode(ctx, m, data)
		if err != nil {
			return v, wrap(p.names[i], m.Part, err)
		}
	}
	cur = len(p.stages)
	v, err = p.codec.Deserialize(ctx, m, data)
	if err != nil {
		return v, wrap(p.codecName, m.Part, err)
	}
	return v, nil
}

func (p *pipe[T]) stageName(i int) string {
	if i >= 0 && i < len(p.names) {
		return p.names[i]
	}
	return p.codecName
}

// PipeSerializer is the twin of [Pipe]: it runs codec, then the stages in
// reverse order, so that the same list of stages reads the same way in both
// directions:
//
//	serde.PipeSerializer(serde.JSON[Order](), serde.AESGCM(keys, ...), serde.Gzip())
//
// encodes JSON, then compresses, then encrypts. Errors and panics are
// reported as in [Pipe].
func PipeSerializer[T any](codec Serializer[T], stages ...EncodeStage) Serializer[T] {
	p := &pipeSer[T]{codec: codec, codecName: nameOf(codec, "codec")}
	p.stages = append(p.stages, stages...)
	return p
}

type pipeSer[T any] struct {
	stages    []EncodeStage
	codec     Serializer[T]
	codecName string
}

func (p *pipeSer[T]) Serialize(ctx context.Context, m *Meta, v T) (data []byte, err error) {
	cur := p.codecName
	defer func() {
		if r := recover(); r != nil {
			data, err = nil, newPanicError(cur, m.Part, r)
		}
	}()
	data, err = p.codec.Serialize(ctx, m, v)
	if err != nil {
		return nil, wrap(cur, m.Part, err)
	}
	for i := len(p.stages) - 1; i >= 0; i-- {
		s := p.stages[i]
		cur = s.Name()
		data, err = s.Encode(ctx, m, data)
		if err != nil {
			return nil, wrap(cur, m.Part, err)
		}
	}
	return data, nil
}

// PipeCodec is [Pipe] and [PipeSerializer] over the same codec and stages.
func PipeCodec[T any](codec Codec[T], stages ...StageCodec) Codec[T] {
	ds := make([]Stage, len(stages))
	es := make([]EncodeStage, len(stages))
	for i, s := range stages {
		ds[i], es[i] = s, s
	}
	return codecPair[T]{Pipe(codec, ds...), PipeSerializer(codec, es...)}
}

type codecPair[T any] struct {
	Deserializer[T]
	Serializer[T]
}
