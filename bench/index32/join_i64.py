# Upper-bound experiment only (bench/index32/bound.sh): joins the i32 descriptors and indices of a
# 32-bit index lowering to the i64 ones convert-nvgpu-to-nvvm (always 64-bit) expects, by extension.
import re,sys
src=open(sys.argv[1]).read().split('\n')
out=[]; alias={}  # %x (memref/index value) -> (%i32 source, type)
cnt=[0]
def fresh():
    cnt[0]+=1; return f"%fx{cnt[0]}"
for l in src:
    m=re.match(r'^(\s*)(%\S+) = builtin\.unrealized_conversion_cast (%\S+) : (.*) to (.*?)( loc\(.*\))?$',l)
    if not m: out.append(l); continue
    ind,res,arg,fr,to,_=m.groups()
    if fr=='i32' and to=='index': alias[res]=(arg,'i32'); continue
    if fr.startswith('!llvm.struct') and 'i32' in fr and to.startswith('memref'): alias[res]=(arg,fr); continue
    if fr=='index' and to=='i64' and arg in alias:
        out.append(f"{ind}{res} = llvm.zext {alias[arg][0]} : i32 to i64"); continue
    if fr.startswith('memref') and arg in alias:
        s,st=alias[arg]
        n=int(re.search(r'array<(\d+) x i32>',st).group(1))
        cur=fresh(); out.append(f"{ind}{cur} = llvm.mlir.poison : {to}")
        paths=[[0],[1],[2]]+[[3,i] for i in range(n)]+[[4,i] for i in range(n)]
        for p in paths:
            ps=','.join(map(str,p)); v=fresh()
            out.append(f"{ind}{v} = llvm.extractvalue {s}[{ps}] : {st}")
            if p[0]>=2:
                w=fresh(); out.append(f"{ind}{w} = llvm.sext {v} : i32 to i64"); v=w
            nxt=fresh(); out.append(f"{ind}{nxt} = llvm.insertvalue {v}, {cur}[{ps}] : {to}"); cur=nxt
        out.append(f"{ind}{res} = llvm.bitcast {cur} : {to} to {to}") if False else out.append(f"{ind}{res} = llvm.select %true_fx, {cur}, {cur} : i1, {to}")
        continue
    out.append(l)
txt='\n'.join(out)
# one i1 true per function
txt=re.sub(r'(llvm\.func @\w+\([^\n]*\{\n)', lambda m: m.group(1)+'      %true_fx = llvm.mlir.constant(true) : i1\n', txt)
open(sys.argv[2],'w').write(txt)
